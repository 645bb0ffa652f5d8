// Streams one /v1/completions request and measures it (stream_measurement.h). Keeps one
// keep-alive connection, so a sender thread that reuses its client does not pay a TCP handshake
// per request.
//
// Ownership: owns its connection. Threading: not thread-safe; one client per sender thread.
#pragma once

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

  // POSTs `body` (completion_request.h) and blocks until the stream ends. Times start at the
  // moment of the send. Never throws for what the server or the network does: that becomes the
  // result's failure.
  StreamResult stream(const std::string& body);

 private:
  std::string path_;
  ServerEndpoint endpoint_;  // for messages: the origin and --timeout
  double read_timeout_s_;
  const RunClock& clock_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace headway::serving::bench
