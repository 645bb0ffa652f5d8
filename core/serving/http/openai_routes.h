// The HTTP routes of the OpenAI-compatible frontend and what each answers: authentication, the
// generation endpoints (JSON or SSE), models, tokenize, health, version, metrics, and the JSON
// error for every failure, including those cpp-httplib detects itself (malformed request, unknown
// route, body too large). docs/serving_http.md describes the behaviour.
//
// Ownership: borrows the service and the options, which outlive it (HttpFrontend owns all three).
// Threading: handlers run concurrently on cpp-httplib's worker threads; the routes keep no state
// but the in-flight count and the kept responses (each safe from any thread).
#pragma once

#include <headway/serving/http_frontend.h>
#include <headway/serving/metrics_registry.h>

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "answer_parser.h"
#include "cors_policy.h"
#include "in_flight_requests.h"
#include "openai_request.h"
#include "openai_response.h"
#include "response_store.h"
#include "sse_responder.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace headway::serving::http {

class OpenAiRoutes {
 public:
  OpenAiRoutes(GenerationService& service, const HttpOptions& options);

  // Registers every route and the error handlers on `server`; call once, before it listens.
  // `body_read` is called on the worker's thread once a request's body has been read, before its
  // route's handler runs (the slow-client reaper's end of a body's deadline).
  void install(httplib::Server& server,
               const std::function<void(const httplib::Request&)>& body_read = nullptr);

  // Ends every generation request in progress (aborted, its client told) and waits for them.
  void stop_requests() { in_flight_.stop_and_wait(); }

  // Called with a request's headers, before cpp-httplib reads its body (the server's pre-routing
  // handler): answers, and returns true, when the body must not be read at all: a chunked body gets
  // 411, since cpp-httplib (0.11) applies the 32 MiB limit only to a body with a Content-Length
  // and would read one of any size (before the handler could even check the API key); more than
  // one Content-Length gets 400. The caller closes the connection: the unread body must not be
  // read as the next request.
  bool refused_before_body(const httplib::Request& request, httplib::Response& response) const;

  // Every route install() registers, as "METHOD /path" with a kept response's id as {id}
  // ("DELETE /v1/responses/{id}"): what the 404 for an unknown route lists.
  static std::vector<std::string> route_names();

 private:
  struct Route;
  // The routes' one table: their paths, methods and handlers.
  static const std::vector<Route>& routes();
  void completions(const httplib::Request& request, httplib::Response& response);
  void chat_completions(const httplib::Request& request, httplib::Response& response);
  bool authorized(const httplib::Request& request, httplib::Response& response) const;
  void generate(const httplib::Request& request, httplib::Response& response, Endpoint endpoint);
  // POST /v1/responses: a chat request written in the Responses API's shapes, answered in them.
  void respond(const httplib::Request& request, httplib::Response& response);
  // The kept responses (store true): GET and DELETE /v1/responses/{id}, GET its input_items, and
  // POST its cancel (refused: none runs in the background). 404 for one not kept.
  void get_response(const httplib::Request& request, httplib::Response& response);
  void delete_response(const httplib::Request& request, httplib::Response& response);
  void list_input_items(const httplib::Request& request, httplib::Response& response);
  void cancel_response(const httplib::Request& request, httplib::Response& response);
  std::shared_ptr<const StoredResponse> kept_response(const httplib::Request& request) const;
  // Chat's tool calls need the server's parser unless guided decoding forces them (400 naming
  // tool_choice otherwise); Mistral's are read with special tokens kept.
  void prepare_tool_parsing(OpenAiRequest& parsed) const;
  // The parser a chat answer's text goes through (reasoning, tool calls), when it needs one; a
  // guided answer of a reasoning model is shaped after its thinking.
  std::optional<AnswerParser> chat_answer_parser(OpenAiRequest& parsed) const;
  // Waits until the service admitted every stream (behind a router, the engine process may still
  // refuse a request): throws the refusal's ApiError, 503 when stopping, 499 when the client left,
  // having aborted every stream.
  void wait_admitted(const httplib::Request& request,
                     const std::vector<std::shared_ptr<RequestStream>>& streams);
  // Runs a non-streamed request through `responder`, its events dropped, to the end; throws 499
  // when the client left, having aborted the request (as any exception thrown while it runs).
  void collect_events(const httplib::Request& request, SseResponder& responder);
  // Streams the responder's events to the client (chunked; HTTP/1.0 as its version allows). The
  // ticket is held until cpp-httplib releases the stream.
  void send_events(const httplib::Request& request, httplib::Response& response,
                   std::unique_ptr<SseResponder> responder, InFlightRequests::Ticket ticket);
  // Submits the request, or one per choice (n > 1); a refused choice aborts those submitted.
  std::vector<std::shared_ptr<RequestStream>> submit_choices(OpenAiRequest parsed);
  // After a choice was refused for a full queue: throws a 400 naming `n` (or the prompts) when
  // the request's choices outnumber the places of every engine's waiting queue together, so that
  // no retry could ever be admitted (a 429 would send the client back for ever). Returns when
  // some queue is unbounded, or the choices would fit empty queues.
  void refuse_choices_no_queues_hold(const OpenAiRequest& parsed, size_t choices) const;
  void models(const httplib::Request& request, httplib::Response& response);
  // vLLM's /tokenize and /detokenize.
  void tokenize(const httplib::Request& request, httplib::Response& response);
  void detokenize(const httplib::Request& request, httplib::Response& response);
  void health(const httplib::Request& request, httplib::Response& response);
  // vLLM's /version: {"version": Headway's release}.
  void version(const httplib::Request& request, httplib::Response& response);
  void metrics(const httplib::Request& request, httplib::Response& response);

  GenerationService& service_;
  const HttpOptions& options_;
  std::optional<ToolCallFormat> tool_call_format_;   // options_.tool_call_parser's
  std::optional<ReasoningFormat> reasoning_format_;  // options_.reasoning_parser's
  InFlightRequests in_flight_;
  const CorsPolicy cors_;  // from options_.cors_allowed_origins and cors_allow_credentials
  ResponseStore responses_;
  // The frontend's own metrics, after the service's in /metrics: the kept responses.
  MetricsRegistry metrics_;
  Gauge& responses_kept_;
  Gauge& responses_kept_bytes_;
  Counter& responses_pushed_out_;  // brought up to the store's count at each scrape
  std::mutex scrape_mutex_;        // so that two scrapes do not both add the same push-outs
};

}  // namespace headway::serving::http
