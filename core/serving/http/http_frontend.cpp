#include <headway/core/error.h>
#include <headway/serving/http_frontend.h>
#include <headway/serving/listen_failure.h>
#include <httplib.h>
#include <sys/socket.h>

#include <chrono>

#include "listening_server.h"
#include "openai_routes.h"
#include "slow_client_reaper.h"

namespace headway::serving {
namespace {

// Requests one keep-alive connection may carry (cpp-httplib's default is 5); load generators and
// SDK clients reuse connections.
constexpr size_t kKeepAliveMaxRequests = 1000;

}  // namespace

HttpFrontend::HttpFrontend(GenerationService& service, HttpOptions options)
    : options_(std::move(options)),
      routes_(std::make_unique<http::OpenAiRoutes>(service, options_)) {}

HttpFrontend::~HttpFrontend() { stop(); }

void HttpFrontend::start() {
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  if (started_) throw core::Error("HTTP frontend on " + where + ": start() called twice");
  started_ = true;

  server_ = std::make_unique<http::ListeningServer>();
  server_->new_task_queue = [] { return new httplib::ThreadPool(kHttpWorkerThreads); };
  server_->set_payload_max_length(kHttpMaxBodyBytes);
  // Each SSE event is a small write of its own: Nagle's algorithm would hold it back behind the
  // client's delayed ACK of the previous one.
  server_->set_tcp_nodelay(true);
  server_->set_keep_alive_max_count(kKeepAliveMaxRequests);
  // cpp-httplib's default adds SO_REUSEPORT, with which a second server binds a busy port and
  // silently shares its connections; SO_REUSEADDR alone still allows a quick restart.
  server_->set_socket_options([](socket_t socket) {
    int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // The reaper exists before the server listens, which is before any handler runs.
  routes_->install(*server_, [this](const httplib::Request& request) {
    reaper_->body_received(
        {request.local_addr, request.local_port, request.remote_addr, request.remote_port});
  });

  const int bound = options_.port == 0 ? server_->bind_to_any_port(options_.host)
                    : server_->bind_to_port(options_.host, options_.port) ? options_.port
                                                                          : -1;
  if (bound <= 0) {
    const std::string why = why_cannot_listen(options_.host, options_.port);
    throw core::Error(cannot_listen_message("HTTP", where, why, "cpp-httplib could not bind it"),
                      HW_UNAVAILABLE);
  }
  if (!server_->raise_backlog(SOMAXCONN)) {
    throw core::Error("HTTP frontend on " + where + ": cannot set the listen backlog",
                      HW_UNAVAILABLE);
  }
  port_.store(static_cast<uint16_t>(bound));
  reaper_ = std::make_unique<http::SlowClientReaper>(
      static_cast<uint16_t>(bound),
      http::SlowClientLimits{
          std::chrono::milliseconds(static_cast<int64_t>(options_.header_timeout_seconds * 1000.0)),
          options_.header_max_bytes,
          std::chrono::milliseconds(static_cast<int64_t>(options_.body_timeout_seconds * 1000.0))});
  // A request counts from its parsed headers (before its body is read) to its written response;
  // its body, from its headers to its handler (body_received(), above).
  server_->set_pre_routing_handler(
      [reaper = reaper_.get(), routes = routes_.get()](const httplib::Request& request,
                                                       httplib::Response& response) {
        reaper->request_began(
            {request.local_addr, request.local_port, request.remote_addr, request.remote_port});
        if (routes->refused_before_body(request, response)) {
          reaper->stop_reading_after_answer(
              {request.local_addr, request.local_port, request.remote_addr, request.remote_port});
          return httplib::Server::HandlerResponse::Handled;
        }
        // cpp-httplib would cut every answer to a Range header (a completion's JSON truncated to
        // 21 bytes, a stream answered 206): generated answers have no byte ranges. The request is
        // cpp-httplib's own non-const object, lent here as const.
        const_cast<httplib::Request&>(request).ranges.clear();
        return httplib::Server::HandlerResponse::Unhandled;
      });
  server_->set_logger(
      [reaper = reaper_.get()](const httplib::Request& request, const httplib::Response&) {
        reaper->request_ended(
            {request.local_addr, request.local_port, request.remote_addr, request.remote_port});
      });
  listener_ = std::thread([this] {
    server_->listen_after_bind();
    listener_returned_.store(true);
  });
  // Server::stop() only takes effect once the server runs, and callers may stop() at once.
  while (!server_->is_running() && !listener_returned_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server_->is_running()) {
    listener_.join();
    throw core::Error("HTTP frontend on " + where + " stopped as soon as it started",
                      HW_UNAVAILABLE);
  }
}

void HttpFrontend::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (!started_ || !listener_.joinable()) return;
  // Streams end first, each with an error event to its client; then the connections close.
  routes_->stop_requests();
  server_->stop();
  // The listener thread's listen_after_bind() now joins the workers, one of which may be reading
  // from a client that sends a byte now and then: its read must end, or the join (and so stop())
  // would wait for as long as the client likes.
  reaper_->shut_down_all();
  listener_.join();
}

}  // namespace headway::serving
