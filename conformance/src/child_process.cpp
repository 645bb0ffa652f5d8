#include "child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
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
    if (ready < 0 && errno != EINTR) return true;  // cannot wait: take what there is
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

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw core::Error(fmt::format("conformance: pipe: {}", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw core::Error(fmt::format("conformance: fork: {}", std::strerror(errno)));
  }
  if (child == 0) {
    // Killed with the suite's process (run_profile_isolated() kills that one on its timeout).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (::dup2(fds[1], STDOUT_FILENO) < 0) ::_exit(127);  // dup2 clears O_CLOEXEC on the copy
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string text;
  const bool finished = read_all(fds[0], timeout_s, text);
  ::close(fds[0]);
  if (!finished) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  OtherProcessOutput out;
  if (!finished) {
    out.error = fmt::format("was still running after {:g} s and was killed", timeout_s);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    out.error = fmt::format("could not be started from {}", executable);
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.error = ending_of(status) + " (its messages are on stderr above)";
  } else if (!nlohmann::json::accept(text)) {
    out.error = "printed something that is not JSON";
  } else {
    out.json = std::move(text);
  }
  return out;
}

}  // namespace headway::conformance
