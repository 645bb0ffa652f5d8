#include <fcntl.h>
#include <fmt/format.h>
#include <headway/conformance/child_process.h>
#include <headway/core/error.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace headway::conformance {
namespace {

// How long the suite, run again to replay what a test compares, may take (the replays take well
// under a second in-process).
constexpr double kOtherProcessSeconds = 300;

}  // namespace

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool read_all(int fd, double timeout_s, std::string& text) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buffer[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) return false;  // cannot wait: the caller ends the child
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    text.append(buffer, static_cast<size_t>(n));
  }
}

std::string ending_of(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
  }
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "ended";
}

namespace {

// A file descriptor closed when it goes out of scope.
class OwnedFd {
 public:
  explicit OwnedFd(int fd = -1) : fd_(fd) {}
  ~OwnedFd() { reset(); }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// The two ends of a pipe, closed on exec and on scope exit.
int pipe_or_throw(int (&fds)[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw core::Error(fmt::format("conformance: pipe: {}", std::strerror(errno)));
  }
  return fds[0];
}
struct Pipe {
  int fds[2] = {-1, -1};
  OwnedFd read{pipe_or_throw(fds)};
  OwnedFd write{fds[1]};
};

// A child process that is killed and reaped when its owner leaves early (an exception).
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      (void)wait();
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  void kill() const { ::kill(pid_, SIGKILL); }
  // Reaps the child: its waitpid() status.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

}  // namespace

OtherProcessOutput run_suite_again(const SuiteContext& context, const std::string& what,
                                   double timeout_s) {
  const std::string executable = context.suite_executable.string();
  // Built before the fork: between fork and exec the child may only make async-signal-safe calls
  // (the suite may be running threads of its own).
  std::vector<std::string> args = {executable,
                                   "--plugin",
                                   context.options.plugin.string(),
                                   "--options",
                                   context.options.options,
                                   "--seed",
                                   std::to_string(context.options.seed),
                                   "--config-dir",
                                   context.options.config_dir.string(),
                                   "--replay",
                                   what};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // The replay only plans; what a plugin keeps is judged by the heap tests of this process. In a
  // sanitizer build LeakSanitizer ended a leaking plugin's replay with its exit status, which
  // read as plans that differ between processes (helper-164): it is off there. The last setting
  // of an option wins, and LSAN_OPTIONS is read after ASAN_OPTIONS: both get it.
  std::vector<std::string> environment;
  bool asan_options = false;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    environment.emplace_back(*entry);
    std::string& variable = environment.back();
    const bool asan = variable.rfind("ASAN_OPTIONS=", 0) == 0;
    if (asan || variable.rfind("LSAN_OPTIONS=", 0) == 0) variable += ":detect_leaks=0";
    asan_options = asan_options || asan;
  }
  if (!asan_options) environment.emplace_back("ASAN_OPTIONS=detect_leaks=0");
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);

  Pipe output;      // the child's stdout: the JSON
  Pipe exec_error;  // the errno of a failed execve; closed unread when exec succeeds
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw core::Error(fmt::format("conformance: fork: {}", std::strerror(errno)));
  if (pid == 0) {
    // Killed with the suite's process (run_profile_isolated() kills that one on its timeout).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    // dup2 clears O_CLOEXEC on the copy, but does nothing when the pipe already is fd 1.
    if (output.write.get() == STDOUT_FILENO) {
      ::fcntl(STDOUT_FILENO, F_SETFD, 0);
    } else if (::dup2(output.write.get(), STDOUT_FILENO) < 0) {
      ::_exit(127);
    }
    ::execve(argv[0], argv.data(), envp.data());
    const int error = errno;
    (void)!::write(exec_error.write.get(), &error, sizeof(error));
    ::_exit(127);
  }
  Child child(pid);
  output.write.reset();
  exec_error.write.reset();
  std::string text;
  const bool finished = read_all(output.read.get(), timeout_s, text);
  if (!finished) child.kill();
  const int status = child.wait();
  int exec_errno = 0;
  const bool exec_failed =
      ::read(exec_error.read.get(), &exec_errno, sizeof(exec_errno)) == sizeof(exec_errno);
  OtherProcessOutput out;
  if (exec_failed) {
    out.error =
        fmt::format("could not be started from {}: {}", executable, std::strerror(exec_errno));
  } else if (!finished) {
    out.error = fmt::format("was still running after {:g} s and was killed", timeout_s);
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.error = ending_of(status) + " (its messages are on stderr above)";
  } else if (!nlohmann::json::accept(text)) {
    out.error = fmt::format("printed something that is not JSON: '{}'",
                            text.substr(0, std::min<size_t>(text.size(), 200)));
  } else {
    out.json = std::move(text);
  }
  return out;
}

std::optional<nlohmann::json> replay_in_other_process(const SuiteContext& context,
                                                      const std::string& what,
                                                      const std::string& doing,
                                                      nlohmann::json metrics, TestRecorder& t) {
  if (context.suite_executable.empty()) {
    t.skip("no suite executable to run again (the suite runs inside another program)");
    return std::nullopt;
  }
  OtherProcessOutput other = run_suite_again(context, what, kOtherProcessSeconds);
  t.metrics() = std::move(metrics);
  if (!other.error.empty()) {
    t.fail(fmt::format("this suite, run again to {} in another process ({}), {}", doing,
                       context.suite_executable.string(), other.error));
    return std::nullopt;
  }
  return nlohmann::json::parse(other.json);
}

}  // namespace headway::conformance
