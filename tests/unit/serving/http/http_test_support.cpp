#include "http_test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace headway::serving::testing {
namespace {

// Liveness bound for socket reads: far above anything a passing test needs, so a broken server
// fails the test instead of hanging it.
constexpr int kReadTimeoutMs = 30'000;

}  // namespace

void HttpFrontendTest::TearDown() {
  if (frontend_) frontend_->stop();
}

void HttpFrontendTest::start_frontend(const std::string& api_key) {
  HttpOptions options;
  options.api_key = api_key;
  start_frontend(options);
}

void HttpFrontendTest::start_frontend(HttpOptions options) {
  frontend_.reset();
  options.port = 0;
  frontend_ = std::make_unique<HttpFrontend>(service_, options);
  frontend_->start();
  ASSERT_NE(frontend_->port(), 0);
}

httplib::Client HttpFrontendTest::client() const {
  httplib::Client client("127.0.0.1", port());
  client.set_read_timeout(30, 0);
  client.set_tcp_nodelay(true);  // else each request waits out a delayed ACK
  return client;
}

httplib::Result HttpFrontendTest::post_json(const std::string& path, const std::string& body,
                                            const httplib::Headers& headers) const {
  return client().Post(path.c_str(), headers, body, "application/json");
}

std::vector<nlohmann::json> json_events(const std::vector<std::string>& data) {
  std::vector<nlohmann::json> events;
  for (const auto& payload : data) {
    if (payload != "[DONE]") events.push_back(nlohmann::json::parse(payload));
  }
  return events;
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> events;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(at, end - at);
    if (event.starts_with("data: ")) events.push_back(event.substr(6));
    at = end + 2;
  }
  return events;
}

nlohmann::json error_of(const std::string& body) {
  const nlohmann::json json = nlohmann::json::parse(body);
  EXPECT_TRUE(json.contains("error")) << body;
  const nlohmann::json& error = json.at("error");
  EXPECT_TRUE(error.at("message").is_string()) << body;
  EXPECT_TRUE(error.at("type").is_string()) << body;
  EXPECT_TRUE(error.contains("param")) << body;
  // The HTTP status, as vLLM writes it, or one of OpenAI's code strings.
  EXPECT_TRUE(error.at("code").is_number_integer() || error.at("code").is_string()) << body;
  return error;
}

RawConnection::RawConnection(uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd_);
    throw std::runtime_error("connect() to port " + std::to_string(port) + " failed");
  }
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) ::close(fd_);
}

void RawConnection::send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("send() failed");
    sent += static_cast<size_t>(n);
  }
}

bool RawConnection::send_unless_closed(const std::string& bytes) {
  pollfd ready{fd_, POLLIN, 0};
  if (::poll(&ready, 1, 0) > 0) {
    char byte = 0;
    // Nothing is expected from the server before the request ends: readable means closed.
    if (::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return false;
  }
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string RawConnection::read_until(const std::string& needle, size_t from) {
  std::array<char, 4096> buffer;
  while (received_.find(needle, from) == std::string::npos) {
    pollfd ready{fd_, POLLIN, 0};
    if (::poll(&ready, 1, kReadTimeoutMs) <= 0) break;
    const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
    if (n <= 0) break;
    received_.append(buffer.data(), static_cast<size_t>(n));
  }
  return received_;
}

void RawConnection::reset() {
  // SO_LINGER 0: close() sends a RST at once, as when a client process dies mid-stream.
  linger hard{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  ::close(fd_);
  fd_ = -1;
}

std::string raw_exchange(uint16_t port, const std::string& request) {
  RawConnection connection(port);
  connection.send(request);
  // The server closes after an error or a "Connection: close" request; a sentinel that never
  // occurs reads to that close.
  return connection.read_until("\x01never\x01");
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TempFile::TempFile(const std::string& text) {
  static std::atomic<int> counter{0};
  path_ =
      (std::filesystem::temp_directory_path() / ("headway_http_test_" + std::to_string(::getpid()) +
                                                 "_" + std::to_string(counter++) + ".json"))
          .string();
  std::ofstream(path_, std::ios::binary) << text;
}

TempFile::~TempFile() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

std::string post_request(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::string open_stream(FakeGenerationService& service, RawConnection& connection,
                        const std::string& path, const std::string& body) {
  const size_t before = service.submitted().size();
  connection.send(post_request(path, body));
  if (!service.wait_for_submits(before + 1, kPatienceSeconds)) return "";
  return service.submitted()[before].request_id;
}

}  // namespace headway::serving::testing
