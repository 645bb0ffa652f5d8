// What the HTTP frontend's tests share: a fixture with a real HttpFrontend on an ephemeral port in
// front of a FakeGenerationService, SSE parsing, raw sockets (for garbage and for disconnecting
// mid-stream) and subprocesses (curl, python3).
//
// Threading: used from the test's thread only.
#pragma once

#include <gtest/gtest.h>
#include <headway/serving/http_frontend.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_generation_service.h"

namespace headway::serving::testing {

class HttpFrontendTest : public ::testing::Test {
 protected:
  void SetUp() override { start_frontend(""); }
  void TearDown() override;

  // Replaces the running frontend with one that wants `api_key` (empty: no auth).
  void start_frontend(const std::string& api_key);
  // Replaces the running frontend with one started with `options` (its port is made 0).
  void start_frontend(HttpOptions options);

  uint16_t port() const { return frontend_->port(); }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port()); }
  httplib::Client client() const;
  httplib::Result post_json(const std::string& path, const std::string& body,
                            const httplib::Headers& headers = {}) const;

  FakeGenerationService service_;
  std::unique_ptr<HttpFrontend> frontend_;
};

// The payloads of a stream's "data: ..." events, in order; SSE comments are skipped.
std::vector<std::string> sse_data(const std::string& body);
// Those payloads parsed, but the closing [DONE].
std::vector<nlohmann::json> json_events(const std::vector<std::string>& data);

// The "error" object of an error body; fails the test when the shape is not OpenAI's.
nlohmann::json error_of(const std::string& body);

// A plain TCP connection to the frontend, for bytes no HTTP client would send.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  void send(const std::string& bytes);
  // Sends `bytes`; false when the server has closed the connection (its end of stream or a reset
  // arrived, or the send failed).
  bool send_unless_closed(const std::string& bytes);
  // Reads until `needle` has arrived (at or after byte `from` of what was read) or the peer
  // closed; returns everything read so far.
  std::string read_until(const std::string& needle, size_t from = 0);
  // Closes the socket, resetting the connection (the way a killed client's kernel does).
  void reset();

 private:
  int fd_ = -1;
  std::string received_;
};

// Liveness bound for waiting on the frontend's threads: far above what a passing run needs.
inline constexpr double kPatienceSeconds = 30.0;

// The bytes of a POST of `body` to `path`, as a RawConnection sends them.
std::string post_request(const std::string& path, const std::string& body);

// Sends a streamed request on `connection` and waits until the service holds it; returns its
// request id, or "" when it never arrived (the caller asserts).
std::string open_stream(FakeGenerationService& service, RawConnection& connection,
                        const std::string& path, const std::string& body);

// A whole HTTP exchange over a fresh connection; returns the raw response.
std::string raw_exchange(uint16_t port, const std::string& request);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout
};
CommandResult run_command(const std::string& command);
// A request body on disk, for curl's --data-binary @file; removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& text);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace headway::serving::testing
