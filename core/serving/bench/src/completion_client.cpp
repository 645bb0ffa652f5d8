#include "headway/serving/bench/completion_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "http_client_setup.h"
#include "http_error_text.h"

namespace headway::serving::bench {

namespace {

// Enough of an error body to quote; the rest of a large one is dropped.
constexpr size_t kMaxErrorBody = 2048;

}  // namespace

CompletionClient::CompletionClient(const ServerEndpoint& endpoint, const RunClock& clock)
    : path_(endpoint.base_path + "/v1/completions"),
      endpoint_(endpoint),
      read_timeout_s_(endpoint.read_timeout_s),
      clock_(clock),
      client_(std::make_unique<httplib::Client>(endpoint.origin)) {
  configure_client(*client_, endpoint);
}

CompletionClient::~CompletionClient() = default;

void CompletionClient::abort() { client_->stop(); }

StreamResult CompletionClient::stream(const std::string& body, uint32_t max_tokens,
                                      const std::atomic<bool>* stop, bool keep_ids) {
  httplib::Request request;
  request.method = "POST";
  request.path = path_;
  request.body = body;
  request.set_header("Content-Type", "application/json");
  request.set_header("Accept", "text/event-stream");

  int status = 0;
  bool event_stream = true;
  std::string error_body;
  SseParser parser;
  std::vector<SseEvent> events;
  size_t event_count = 0;
  StreamMeasurement measurement(clock_.now(), max_tokens, keep_ids);
  bool interrupted = false;
  double last_bytes = clock_.now();
  request.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    last_bytes = clock_.now();
    // A server that ignored "stream": true answers with one JSON body: say so, quoting it.
    const std::string type = response.get_header_value("Content-Type");
    event_stream = type.empty() || type.find("text/event-stream") != std::string::npos;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    const double now = clock_.now();  // before parsing: the bytes' arrival time
    last_bytes = now;
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
      interrupted = true;
      return false;  // httplib closes the connection: the server sees the client go
    }
    if (status != 200 || !event_stream) {
      error_body.append(data,
                        std::min(size, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
      return true;
    }
    events.clear();
    parser.feed(std::string_view(data, size), events);
    event_count += events.size();
    for (const SseEvent& event : events) measurement.on_event(event, now);
    return true;
  };

  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client_->send(request, response, error);
  const double now = clock_.now();
  // Stopped: closed here at the next bytes, or shut down by abort() while the server sent none.
  interrupted |= stop != nullptr && stop->load() && (!sent || error != httplib::Error::Success);
  if (interrupted) {
    measurement.fail(FailureKind::kInterrupted,
                     fmt::format("bench was interrupted after {} event{} of the stream",
                                 event_count, event_count == 1 ? "" : "s"),
                     now);
  } else if (status != 0 && status != 200) {
    measurement.fail(FailureKind::kHttpStatus, http_error_text(status, error_body), now, status);
  } else if (status == 200 && !event_stream) {
    measurement.fail(
        FailureKind::kBadChunk,
        fmt::format("the answer is not an event stream (Content-Type {}): {}",
                    response.get_header_value("Content-Type"), error_body.substr(0, 200)),
        now);
  } else if (!sent || error != httplib::Error::Success) {
    std::string what;
    if (error == httplib::Error::Read && now - last_bytes >= 0.99 * read_timeout_s_) {
      what = fmt::format("no data for {:g} s (--timeout)", read_timeout_s_);
    } else if (error == httplib::Error::Read && status == 200) {
      what = fmt::format("the server closed the connection after {} event{}", event_count,
                         event_count == 1 ? "" : "s");
    } else {
      what = transport_failure(error, endpoint_);
    }
    measurement.fail(FailureKind::kTransport, status == 200 ? "the stream broke: " + what : what,
                     now);
  }
  return measurement.finish(now);
}

}  // namespace headway::serving::bench
