// `headway serve` as a child process for the integration tests: a per-test temp directory, the
// process with its stderr read through a pipe (to learn the ports it bound and keep its log), and
// curl for one-off requests. Threading: one test thread uses each object.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <tiny_checkpoint.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../unit/test_support/tiny_checkpoint_dir.h"

namespace headway::test {

namespace fs = std::filesystem;

struct TempDir {
  explicit TempDir(const std::string& name = "serve")
      : path(fs::temp_directory_path() / ("headway_" + name + "_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

// Writes a deployment serving a tiny random-weight CPU checkpoint (2 layers, hidden 64, F32, one
// thread per engine) into `dir`, with `tables` (the [[engines]], [router] and [server] tables)
// appended, as `file_name`; returns the deployment file's path.
inline fs::path write_tiny_deployment(const fs::path& dir, const std::string& name,
                                      const std::string& tables,
                                      const std::string& file_name = "deploy.toml") {
  models::cpu::write_tiny_checkpoint(tiny_test_spec(), dir / "tiny");
  const fs::path config = dir / file_name;
  std::ofstream(config) << "name = \"" << name << "\"\n[model]\nplugin = \"cpu\"\n"
                        << "options = { path = \"tiny\", threads = 1, kv_cache_gb = 0.02, "
                           "max_model_len = 512 }\n"
                        << tables;
  return config;
}

// The `headway serve` child: stderr (where it says which ports it bound) and stdout (its log
// lines) are read through one pipe.
class ServeProcess {
 public:
  // `extra`: more `serve` arguments after --config.
  explicit ServeProcess(const fs::path& config, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {HEADWAY_CLI, "--log-level", "info",
                                     "serve",     "--config",    config.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDERR_FILENO);
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execv(HEADWAY_CLI, argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    err_fd_ = fds[0];
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();  // the pipe closed with the process
    if (err_fd_ >= 0) ::close(err_fd_);
  }

  // From now on a background thread collects stderr into log(), so that a test which makes the
  // server log a lot never blocks it on a full pipe. wait_for_line() may not be called after it.
  void keep_reading() {
    reader_ = std::thread([this] { read_rest(); });
  }

  // Reads stderr until `pattern` matches a line; returns its first group, or nullopt when the
  // process closed stderr (exited) first.
  std::optional<std::string> wait_for_line(const std::regex& pattern) {
    std::string line;
    char c;
    while (::read(err_fd_, &c, 1) == 1) {
      log_ += c;
      if (c != '\n') {
        line += c;
        continue;
      }
      std::smatch match;
      if (std::regex_search(line, match, pattern)) return match[1].str();
      line.clear();
    }
    return std::nullopt;
  }

  // Sends `signal` and returns the exit status; the rest of stderr is kept in log().
  int stop(int signal) {
    if (!exited_) ::kill(pid_, signal);
    if (reader_.joinable()) {
      reader_.join();
    } else {
      read_rest();
    }
    if (!exited_) ::waitpid(pid_, &status_, 0);
    exited_ = true;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  // Sends `signal` without waiting (SIGSTOP to freeze the process, ...).
  void signal(int signal) {
    if (!exited_) ::kill(pid_, signal);
  }
  const std::string& log() const { return log_; }
  pid_t pid() const { return pid_; }
  // True while the process has neither exited nor been killed (reaps it when it has).
  bool alive() {
    if (!exited_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    return !exited_;
  }

 private:
  void read_rest() {
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(err_fd_, buffer, sizeof buffer)) > 0) log_.append(buffer, n);
  }

  pid_t pid_ = -1;
  int err_fd_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string log_;
  std::thread reader_;
};

// Two engine processes (`[server] role = "engine"`, one engine each, ephemeral gRPC ports) and a
// router process in front of them with the length router: prompts of `long_from` tokens or more go
// to engine1 (pool "long"), the rest to engine0 (pool "short"). Each process logs to its own pipe.
// `slow_long_engine`: engine1 serves a bigger checkpoint with the same tokenizer and vocabulary
// (8 layers, hidden 512: milliseconds per token instead of a fraction of one), so that a test can
// act while one of its requests is still streaming. `router_server_keys`: more lines of the
// router's [server] table ("reasoning_parser = \"qwen3\"\n"). `router_options`: more options of
// the length router; `short_engine_keys`: more keys of the short pool's [[engines]] table;
// `router_plugin`: another router plugin (a path) instead of the length router; `engine_keys`: more
// keys of both engine processes' [[engines]] tables.
class RoutedEngineProcesses {
 public:
  RoutedEngineProcesses(const fs::path& dir, uint32_t long_from, double load_report_interval_s,
                        bool slow_long_engine = false,
                        const std::string& scheduler =
                            "{ plugin = \"chunked\", options = { max_num_batched_tokens = 256, "
                            "max_num_seqs = 16 } }",
                        const std::string& router_server_keys = "",
                        const std::string& router_options = "",
                        const std::string& short_engine_keys = "",
                        const std::string& router_plugin = "",
                        const std::string& engine_keys = "") {
    const std::regex grpc_port(R"(gRPC listening on 127\.0\.0\.1:([0-9]+))");
    for (const char* pool : {"short", "long"}) {
      std::string keys = std::string(pool) == "short" ? short_engine_keys : "";
      if (!engine_keys.empty()) keys += (keys.empty() ? "" : "\n") + engine_keys;
      const fs::path config = write_tiny_deployment(
          dir, std::string("engine-") + pool,
          "[[engines]]\n" + keys + (keys.empty() ? "" : "\n") + "scheduler = " + scheduler +
              "\n[server]\nrole = \"engine\"\ngrpc_port = 0\ndrain_timeout_s = 30\n",
          std::string("engine_") + pool + ".toml");
      if (slow_long_engine && std::string(pool) == "long") use_slow_checkpoint(dir, config);
      // Each engine process traces its steps (steps_short.jsonl, steps_long.jsonl), as an
      // operator would to fit the simulator to a served deployment.
      engines_.push_back(std::make_unique<ServeProcess>(
          config, std::vector<std::string>{
                      "--step-trace", (dir / (std::string("steps_") + pool + ".jsonl")).string()}));
      const std::optional<std::string> port = engines_.back()->wait_for_line(grpc_port);
      if (!port)
        throw std::runtime_error("engine process did not start:\n" + engines_.back()->log());
      engines_.back()->keep_reading();
      ports_.push_back(std::stoi(*port));
    }
    std::string tables;
    for (size_t e = 0; e < ports_.size(); ++e) {
      tables += std::string("[[engines]]\npool = \"") + (e == 0 ? "short" : "long") +
                "\"\naddress = \"127.0.0.1:" + std::to_string(ports_[e]) + "\"\n";
    }
    tables += router_plugin.empty()
                  ? "[router]\nplugin = \"length\"\noptions = { pools = \"short:0,long:" +
                        std::to_string(long_from) + "\"" +
                        (router_options.empty() ? std::string() : ", " + router_options) + " }\n"
                  : "[router]\nplugin = \"" + router_plugin + "\"\n";
    tables +=
        "[server]\nrole = \"router\"\nhttp_port = 0\ngrpc_port = 0\ndrain_timeout_s = 30\n"
        "load_report_interval_s = " +
        std::to_string(load_report_interval_s) + "\n" + router_server_keys;
    router_ =
        std::make_unique<ServeProcess>(write_tiny_deployment(dir, "router", tables, "router.toml"));
    const std::optional<std::string> http =
        router_->wait_for_line(std::regex(R"(HTTP listening on http://127\.0\.0\.1:([0-9]+))"));
    if (!http) throw std::runtime_error("router process did not start:\n" + router_->log());
    const std::optional<std::string> grpc = router_->wait_for_line(grpc_port);  // after HTTP's
    if (!grpc) throw std::runtime_error("router process did not start:\n" + router_->log());
    router_->keep_reading();
    http_port_ = std::stoi(*http);
    router_grpc_port_ = std::stoi(*grpc);
  }

  static void use_slow_checkpoint(const fs::path& dir, const fs::path& config) {
    models::cpu::TinyModelSpec spec;
    spec.layers = 8;
    spec.hidden = 512;
    spec.heads = 8;
    spec.kv_heads = 4;
    spec.ffn = 1408;
    spec.dtype = models::cpu::DType::kF32;
    models::cpu::write_tiny_checkpoint(spec, dir / "slow");
    std::ifstream in(config);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    std::ofstream(config) << std::regex_replace(text, std::regex("path = \"tiny\""),
                                                "path = \"slow\"");
  }

  ServeProcess& engine(size_t i) { return *engines_.at(i); }
  ServeProcess& router() { return *router_; }
  int engine_port(size_t i) const { return ports_.at(i); }
  int http_port() const { return http_port_; }
  int router_grpc_port() const { return router_grpc_port_; }

 private:
  std::vector<std::unique_ptr<ServeProcess>> engines_;
  std::vector<int> ports_;
  std::unique_ptr<ServeProcess> router_;
  int http_port_ = 0;
  int router_grpc_port_ = 0;
};

struct CurlResult {
  int http_status = 0;
  std::string body;
};

inline CurlResult curl(const std::string& args) {
  const std::string command = "curl -s --max-time 120 -w '\\n%{http_code}' " + args;
  CurlResult result;
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  ::pclose(pipe);
  const size_t last = out.rfind('\n');
  if (last == std::string::npos) return result;
  result.body = out.substr(0, last);
  result.http_status = std::atoi(out.c_str() + last + 1);
  return result;
}

}  // namespace headway::test
