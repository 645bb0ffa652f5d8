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

// A stream holds its connection far past the header deadline, and a connection that sends a
// request after an idle while keeps it: only reading a request counts.
TEST_F(HttpFrontendTest, StreamsAndKeptAliveConnectionsOutliveTheHeaderDeadline) {
  HttpOptions options;
  options.header_timeout_seconds = 1.0;
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

  // A 1 MB body is read inside its request; the next request on the connection is answered.
  service_.set_hold(false);
  httplib::Client keep_alive = client();
  keep_alive.set_keep_alive(true);
  const std::string big = R"({"prompt": ")" + std::string(1 << 20, 'p') + R"(", "max_tokens": 1})";
  for (int i = 0; i < 2; ++i) {
    auto answer = keep_alive.Post("/v1/completions", big, "application/json");
    ASSERT_TRUE(answer) << i;
    EXPECT_EQ(answer->status, 200) << i;
    std::this_thread::sleep_for(1500ms);  // three scans of an idle connection
  }
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
