// Clients that send a request slowly, or send headers without end, do not hold a worker (or the
// server's memory) for as long as they like, and never keep stop() waiting. Each check is on the
// order of events (the server closed the connection while the client still had bytes to send),
// not on how long anything took.
#include <atomic>
#include <chrono>
#include <thread>

#include "http_test_support.h"

namespace headway::serving::testing {
namespace {

using namespace std::chrono_literals;

// Sends `head`, then one byte of `dribble` every 50 ms until the server closes the connection or
// the bytes run out (`dribble` long enough for a minute). Returns whether the server closed it.
bool dribble(RawConnection& connection, const std::string& head, const std::string& dribble) {
  if (!connection.send_unless_closed(head)) return true;
  for (char byte : dribble) {
    std::this_thread::sleep_for(50ms);
    if (!connection.send_unless_closed(std::string(1, byte))) return true;
  }
  return false;
}

TEST_F(HttpFrontendTest, AClientDribblingItsHeadersIsClosedAtTheHeaderDeadline) {
  HttpOptions options;
  options.header_timeout_seconds = 1.0;
  start_frontend(options);
  RawConnection connection(port());
  // cpp-httplib's own read timeout (5 s) restarts at every byte: without the deadline the client
  // sends all 1,200 bytes (a minute).
  EXPECT_TRUE(dribble(connection, "GET /health HTTP/1.1\r\nX-Slow: ", std::string(1200, 'a')));
  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// 300 MB of header lines grew the server by gigabytes: the connection is closed once more than
// header_max_bytes of them were read.
TEST_F(HttpFrontendTest, HeadersWithoutEndAreCutAtTheByteLimit) {
  HttpOptions options;
  options.header_timeout_seconds = 600.0;  // only the size can end it
  start_frontend(options);
  RawConnection connection(port());
  ASSERT_TRUE(connection.send_unless_closed("GET /health HTTP/1.1\r\n"));
  const std::string line = "X-Filler: " + std::string(1000, 'a') + "\r\n";
  bool closed = false;
  for (int i = 0; i < 100000 && !closed; ++i) {  // up to 100 MB
    closed = !connection.send_unless_closed(line);
    if (i % 64 == 63) std::this_thread::sleep_for(5ms);  // let a scan see it
  }
  EXPECT_TRUE(closed);
}

// A stream holds its connection far past the header and body deadlines, and a connection that
// sends a request after an idle while keeps it: only reading a request counts.
TEST_F(HttpFrontendTest, StreamsAndKeptAliveConnectionsOutliveTheHeaderDeadline) {
  HttpOptions options;
  options.header_timeout_seconds = 1.0;
  options.body_timeout_seconds = 1.0;
  start_frontend(options);
  service_.set_hold(true);
  RawConnection stream(port());
  const std::string body = R"({"prompt": "x", "stream": true, "max_tokens": 5})";
  stream.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(service_.wait_for_submits(1, 30));
  const std::string id = service_.submitted()[0].request_id;
  std::this_thread::sleep_for(2500ms);  // well past the deadline, with the stream silent
  service_.push(id, 2);
  service_.finish(id, Finish::kStop);
  const std::string events = stream.read_until("[DONE]");
  EXPECT_NE(events.find("[DONE]"), std::string::npos) << events;

  // A 100 KB body (over header_max_bytes) is read inside its request, and the connection, idle
  // past the header deadline afterwards, still answers its next request: on the same socket.
  service_.set_hold(false);
  RawConnection kept(port());
  const std::string big =
      R"({"prompt": ")" + std::string(100 * 1024, 'p') + R"(", "max_tokens": 1})";
  kept.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
            std::to_string(big.size()) + "\r\n\r\n" + big);
  ASSERT_NE(kept.read_until("}}").find("HTTP/1.1 200"), std::string::npos);
  std::this_thread::sleep_for(1500ms);  // three scans of the idle connection
  ASSERT_TRUE(kept.send_unless_closed("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string both = kept.read_until("\"status\":\"ok\"");
  EXPECT_NE(both.find("\"status\":\"ok\""), std::string::npos) << both;
}

// A body sent slowly is inside its request (its headers were parsed): the header deadline does not
// apply to it.
TEST_F(HttpFrontendTest, ASlowBodyIsNotCutByTheHeaderDeadline) {
  HttpOptions options;
  options.header_timeout_seconds = 1.0;
  start_frontend(options);
  RawConnection connection(port());
  const std::string body = R"({"prompt": ")" + std::string(4000, 'p') + R"(", "max_tokens": 1})";
  ASSERT_TRUE(connection.send_unless_closed(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n"));
  for (size_t at = 0; at < body.size(); at += 200) {  // 2 s, twice the deadline
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(connection.send_unless_closed(body.substr(at, 200))) << "cut at byte " << at;
  }
  EXPECT_NE(connection.read_until("}}").find("HTTP/1.1 200"), std::string::npos);
}

// A body sent a byte now and then held a worker for as long as the client liked (cpp-httplib's read
// timeout restarts at every byte), before the API key was checked: helper-130's walk held all 320
// workers with 330 such connections. It is cut at the body deadline.
TEST_F(HttpFrontendTest, ABodyDribbledPastTheBodyDeadlineIsCut) {
  HttpOptions options;
  options.body_timeout_seconds = 1.0;
  options.api_key = "secret";
  start_frontend(options);
  RawConnection connection(port());
  EXPECT_TRUE(dribble(connection,
                      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{",
                      std::string(1200, ' ')));
  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// One client sending a header byte now and then kept stop() (and so a SIGTERM) waiting for as long
// as it kept sending.
TEST_F(HttpFrontendTest, StopDoesNotWaitForAClientStillSendingItsHeaders) {
  HttpOptions options;
  options.header_timeout_seconds = 600.0;  // only stop() can end it
  start_frontend(options);
  RawConnection connection(port());
  std::atomic<bool> sent_everything{false};
  std::thread client([&] {
    if (!dribble(connection, "GET /health HTTP/1.1\r\nX-Slow: ", std::string(1200, 'a'))) {
      sent_everything = true;
    }
  });
  std::this_thread::sleep_for(300ms);  // the server is reading its headers
  frontend_->stop();
  EXPECT_FALSE(sent_everything.load()) << "stop() returned only once the client had sent it all";
  client.join();
  EXPECT_FALSE(sent_everything.load());
}

}  // namespace
}  // namespace headway::serving::testing
