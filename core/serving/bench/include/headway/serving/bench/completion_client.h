// Streams one /v1/completions request and measures it (stream_measurement.h). Keeps one
// keep-alive connection, so a sender thread that reuses its client does not pay a TCP handshake
// per request.
//
// Ownership: owns its connection. Threading: not thread-safe, but for abort(); one client per
// sender thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "headway/serving/bench/run_clock.h"
#include "headway/serving/bench/server_endpoint.h"
#include "headway/serving/bench/stream_measurement.h"

namespace httplib {
class Client;
}

namespace headway::serving::bench {

class CompletionClient {
 public:
  // Borrows `clock`, which must outlive the client. Connects lazily, on the first request.
  CompletionClient(const ServerEndpoint& endpoint, const RunClock& clock);
  ~CompletionClient();
  CompletionClient(const CompletionClient&) = delete;
  CompletionClient& operator=(const CompletionClient&) = delete;

  // POSTs `body` (completion_request.h, asking for `max_tokens`) and blocks until the stream
  // ends. Times start at the moment of the send. Never throws for what the server or the network
  // does: that becomes the result's failure. When `stop` (borrowed; may be null) turns true the
  // stream is closed at its next bytes and fails as kInterrupted. `keep_ids`: the result carries
  // the answer's ids (StreamResult::token_ids).
  StreamResult stream(const std::string& body, uint32_t max_tokens = 0,
                      const std::atomic<bool>* stop = nullptr, bool keep_ids = false);

  // Shuts the connection down under a stream() running on another thread, which then returns
  // (as kInterrupted when its `stop` is true): for a server that sends nothing, where stream()
  // would otherwise wait for --timeout. The one call that may come from another thread.
  void abort();

 private:
  std::string path_;
  ServerEndpoint endpoint_;  // for messages: the origin and --timeout
  double read_timeout_s_;
  const RunClock& clock_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace headway::serving::bench
