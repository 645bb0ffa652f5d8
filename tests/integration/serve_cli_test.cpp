// `headway serve` as an operator runs it: a subprocess on ephemeral ports with the CPU tiny model,
// probed with curl (/health, /v1/completions, /v1/models, /metrics checked by promtool), then
// stopped with SIGTERM, which must drain and exit 0. The test starts and stops everything it uses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <tiny_checkpoint.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "../unit/serving/metrics/promtool_check.h"

namespace headway::test {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() : path(fs::temp_directory_path() / ("headway_serve_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

// The `headway serve` child: stderr is read through a pipe to learn the ports it bound.
class ServeProcess {
 public:
  explicit ServeProcess(const fs::path& config) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDERR_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execl(HEADWAY_CLI, HEADWAY_CLI, "--log-level", "info", "serve", "--config", config.c_str(),
              static_cast<char*>(nullptr));
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
    if (err_fd_ >= 0) ::close(err_fd_);
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
    ::kill(pid_, signal);
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(err_fd_, buffer, sizeof buffer)) > 0) log_.append(buffer, n);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  int err_fd_ = -1;
  bool exited_ = false;
  std::string log_;
};

struct CurlResult {
  int http_status = 0;
  std::string body;
};

CurlResult curl(const std::string& args) {
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

TEST(ServeCli, ServesOverHttpAndDrainsOnSigterm) {
  TempDir dir;
  models::cpu::TinyModelSpec spec;
  spec.layers = 2;
  spec.hidden = 64;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ffn = 128;
  spec.dtype = models::cpu::DType::kF32;
  models::cpu::write_tiny_checkpoint(spec, dir.path / "tiny");
  const fs::path config = dir.path / "deploy.toml";
  std::ofstream(config) << "name = \"serve-test\"\n"
                           "[model]\nplugin = \"cpu\"\n"
                           "options = { path = \"tiny\", threads = 1, kv_cache_gb = 0.02, "
                           "max_model_len = 512 }\n"
                           "[[engines]]\nscheduler = \"chunked\"\n"
                           "[server]\nhttp_port = 0\ngrpc_port = 0\ndrain_timeout_s = 5\n";

  ServeProcess serve(config);
  const std::optional<std::string> http =
      serve.wait_for_line(std::regex(R"(HTTP listening on http://(127\.0\.0\.1:[0-9]+))"));
  ASSERT_TRUE(http.has_value()) << "headway serve did not report an HTTP address:\n" << serve.log();
  if (std::system("command -v curl >/dev/null 2>&1") != 0) {
    EXPECT_EQ(serve.stop(SIGTERM), 0) << serve.log();
    GTEST_SKIP() << "curl is not installed";
  }
  const std::string base = "http://" + *http;

  const CurlResult health = curl(base + "/health");
  EXPECT_EQ(health.http_status, 200) << health.body;

  const CurlResult models = curl(base + "/v1/models");
  EXPECT_EQ(models.http_status, 200) << models.body;
  EXPECT_NE(models.body.find("\"tiny\""), std::string::npos) << models.body;

  const CurlResult completion = curl(
      "-H 'Content-Type: application/json' -d '{\"model\": \"tiny\", \"prompt\": \"hello\", "
      "\"max_tokens\": 5}' " +
      base + "/v1/completions");
  EXPECT_EQ(completion.http_status, 200) << completion.body;
  EXPECT_NE(completion.body.find("\"choices\""), std::string::npos) << completion.body;

  const CurlResult bad = curl(
      "-H 'Content-Type: application/json' -d '{\"model\": \"tiny\", "
      "\"prompt\": \"hello\", \"max_tokens\": 5, \"top_p\": 7}' " +
      base + "/v1/completions");
  EXPECT_EQ(bad.http_status, 400) << bad.body;

  const CurlResult metrics = curl(base + "/metrics");
  EXPECT_EQ(metrics.http_status, 200);
  EXPECT_NE(metrics.body.find("headway_request_success_total{engine=\"0\",pool=\"\","
                              "request_class=\"completion\",finished_reason="),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("headway_request_rejected_total{reason=\"invalid\"} 1"),
            std::string::npos)
      << metrics.body;
  if (auto check = promtool_check_metrics(metrics.body)) {
    EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << metrics.body;
  }

  EXPECT_EQ(serve.stop(SIGTERM), 0) << serve.log();
  EXPECT_NE(serve.log().find("draining"), std::string::npos) << serve.log();
}

TEST(ServeCli, RefusesAServerRoleItCannotRunYet) {
  TempDir dir;
  const fs::path config = dir.path / "deploy.toml";
  std::ofstream(config) << "[model]\nplugin = \"sim\"\n[[engines]]\n[server]\nrole = \"router\"\n";
  ServeProcess serve(config);
  EXPECT_FALSE(serve.wait_for_line(std::regex("(listening)")).has_value());
  EXPECT_EQ(serve.stop(SIGTERM), 1) << serve.log();
  EXPECT_NE(serve.log().find("server.role"), std::string::npos) << serve.log();
}

}  // namespace
}  // namespace headway::test
