#include "openai_routes.h"

#include <fmt/format.h>
#include <headway/serving/bearer_key.h>
#include <headway/serving/echoed_input.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api_error.h"
#include "choice_reader.h"
#include "chunk_stream_format.h"
#include "client_connection_watch.h"
#include "client_request_id.h"
#include "completion_collector.h"
#include "freed_memory.h"
#include "openai_logprobs.h"
#include "openai_request.h"
#include "responses_request.h"
#include "responses_stream_format.h"
#include "sse_responder.h"

namespace headway::serving::http {
namespace {

constexpr const char* kJson = "application/json";

void send_json(httplib::Response& response, int status, const nlohmann::ordered_json& body) {
  response.status = status;
  response.set_content(dump_json(body), kJson);
}

void send_error(httplib::Response& response, const ApiError& error) {
  // A full waiting queue (429) frees up within a few steps: a retry after a second is reasonable,
  // and the OpenAI SDKs wait for what Retry-After says instead of their own backoff.
  if (error.status() == 429) response.set_header("Retry-After", "1");
  send_json(response, error.status(), error_json(error));
}

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

// Every failure inside a handler becomes the OpenAI error shape; nothing escapes to cpp-httplib.
// `body_read` (may be empty) comes first: the request's body is read by then. After a large body,
// the memory its parse freed goes back to the system (freed_memory.h).
Handler guarded(Handler handler, const std::function<void(const httplib::Request&)>& body_read) {
  return [handler = std::move(handler), body_read](const httplib::Request& request,
                                                   httplib::Response& response) {
    if (body_read) body_read(request);
    try {
      handler(request, response);
    } catch (const ApiError& error) {
      send_error(response, error);
    } catch (const ServiceError& error) {
      send_error(response, api_error_of(error));
    } catch (const std::exception& error) {
      send_error(response, ApiError(500, std::string("internal error: ") + error.what()));
    } catch (...) {
      send_error(response, ApiError(500, "internal error"));
    }
    return_freed_memory_after_body(request.body.size());
  };
}

// The X-Request-Id header's id (client_request_id.h): the answer's id is `prefix` and it, over a
// body's request_id.
void take_header_request_id(const httplib::Request& request, std::string_view prefix,
                            OpenAiRequest& parsed) {
  if (const std::optional<std::string> id = header_request_id(request)) {
    parsed.name_answer(std::string(prefix) + *id, "X-Request-Id");
  }
}

void refuse_multipart(const httplib::Request& request) {
  if (request.is_multipart_form_data()) {
    // cpp-httplib takes a multipart body apart into form fields, leaving no JSON to read.
    throw ApiError(400,
                   "a multipart/form-data body (curl -F) is not accepted: send the request as "
                   "JSON with Content-Type: application/json");
  }
}

// Makes `sink` one for running a responder to its end inside the handler: each write goes to
// `events` (when given), and done() sets `ended`. (A DataSink cannot be moved or copied.)
void make_collecting(httplib::DataSink& sink, std::string* events, bool& ended) {
  sink.write = [events](const char* data, size_t size) {
    if (events != nullptr) events->append(data, size);
    return true;
  };
  sink.is_writable = [] { return true; };
  sink.done = [&ended] { ended = true; };
}

// A kept response's routes: its id is any one path step.
constexpr std::string_view kPathStep = "([^/]+)";
constexpr const char* kKeptResponse = R"(/v1/responses/([^/]+))";
constexpr const char* kKeptInputItems = R"(/v1/responses/([^/]+)/input_items)";
constexpr const char* kKeptCancel = R"(/v1/responses/([^/]+)/cancel)";

// Whether `path` is one of a route's: its pattern is a plain path, or one with a kPathStep.
// (cpp-httplib matches its routes itself; this is for its error handler, which is told no route.)
bool route_matches(std::string_view pattern, std::string_view path) {
  const size_t step = pattern.find(kPathStep);
  if (step == std::string_view::npos) return pattern == path;
  const std::string_view before = pattern.substr(0, step);
  const std::string_view after = pattern.substr(step + kPathStep.size());
  if (path.size() <= before.size() + after.size() || !path.starts_with(before) ||
      !path.ends_with(after)) {
    return false;
  }
  const std::string_view id =
      path.substr(before.size(), path.size() - before.size() - after.size());
  return id.find('/') == std::string_view::npos;
}

// 404 for a response id the store does not have.
ApiError not_kept(const std::string& id, const ResponseStore& store) {
  return ApiError(
      404, "no response " + quote_input(id) + " is kept here (" + store.why_not_found() + ")",
      "response_id");
}

// The request's query parameter `name` as a whole number in [min, max]; 400 naming it otherwise.
int64_t query_integer(const httplib::Request& request, const char* name, int64_t fallback,
                      int64_t min, int64_t max) {
  if (!request.has_param(name)) return fallback;
  const std::string text = request.get_param_value(name);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    throw invalid_field(name, fmt::format("{} must be a whole number from {} to {}, not {}", name,
                                          min, max, quote_input(text)));
  }
  return value;
}

// An HTTP/1.0 request that asks to keep its connection ("Connection: keep-alive", any case).
bool asks_keep_alive(const httplib::Request& request) {
  std::string value = request.get_header_value("Connection");
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return value.find("keep-alive") != std::string::npos;
}

// The message for an error cpp-httplib produced without a handler; `routes` lists the routes
// served, for an unknown one.
std::string library_error_message(const httplib::Request& request, int status,
                                  const std::string& routes) {
  switch (status) {
    case 400:
      // cpp-httplib reads no body without a length (curl -X POST with no data sends none).
      if ((request.method == "POST" || request.method == "PUT" || request.method == "PATCH") &&
          (request.version == "HTTP/1.1" || request.version == "HTTP/1.0") &&
          !request.path.empty() && !request.has_header("Content-Length") &&
          !request.has_header("Transfer-Encoding")) {
        // cpp-httplib also stops reading headers at a line over 8 KiB (a huge Authorization
        // header), so the Content-Length after it goes unseen: say so (helper-130's walk).
        // A chunked body is refused with 411 (refused_before_body), so offer only a length.
        return "a " + request.method +
               " needs a body with a Content-Length header: send the request as JSON (header "
               "lines over 8192 bytes are not read)";
      }
      return "malformed HTTP request (or a header line over 8192 bytes)";
    case 404:
      return "no route " + request.method + " " + request.path + "; the routes are " + routes;
    case 413:
      // cpp-httplib (Debian's build) caps a form-encoded body at 8,192 bytes, whatever the
      // server's own limit: curl -d sends that type unless told otherwise.
      if (request.get_header_value("Content-Type")
              .starts_with("application/x-www-form-urlencoded") &&
          std::strtoull(request.get_header_value("Content-Length").c_str(), nullptr, 10) <=
              kHttpMaxBodyBytes) {
        return "a body sent as Content-Type application/x-www-form-urlencoded (curl -d's "
               "default) is limited to 8192 bytes by the HTTP library; send it with "
               "Content-Type: application/json";
      }
      return "request body is larger than " + std::to_string(kHttpMaxBodyBytes) + " bytes";
    case 414:
      return "request URI is too long";
    default:
      return "HTTP error " + std::to_string(status);
  }
}

}  // namespace

struct OpenAiRoutes::Route {
  const char* path;  // a regular expression: a kept response's id is its first group
  const char* method;
  void (OpenAiRoutes::*handle)(const httplib::Request&, httplib::Response&);
};

// What install() registers and the 404 for an unknown route lists: one table, so that the two
// cannot part (the list once left out GET /version).
const std::vector<OpenAiRoutes::Route>& OpenAiRoutes::routes() {
  static const std::vector<Route> kRoutes = {
      {"/v1/completions", "POST", &OpenAiRoutes::completions},
      {"/v1/chat/completions", "POST", &OpenAiRoutes::chat_completions},
      {"/v1/responses", "POST", &OpenAiRoutes::respond},
      {kKeptResponse, "GET", &OpenAiRoutes::get_response},
      {kKeptResponse, "DELETE", &OpenAiRoutes::delete_response},
      {kKeptInputItems, "GET", &OpenAiRoutes::list_input_items},
      {kKeptCancel, "POST", &OpenAiRoutes::cancel_response},
      {"/v1/models", "GET", &OpenAiRoutes::models},
      {"/tokenize", "POST", &OpenAiRoutes::tokenize},
      {"/detokenize", "POST", &OpenAiRoutes::detokenize},
      {"/health", "GET", &OpenAiRoutes::health},
      {"/version", "GET", &OpenAiRoutes::version},
      {"/metrics", "GET", &OpenAiRoutes::metrics},
  };
  return kRoutes;
}

std::vector<std::string> OpenAiRoutes::route_names() {
  std::vector<std::string> names;
  for (const Route& route : routes()) {
    std::string path = route.path;
    if (const size_t step = path.find(kPathStep); step != std::string::npos) {
      path.replace(step, kPathStep.size(), "{id}");
    }
    names.push_back(std::string(route.method) + " " + path);
  }
  return names;
}

void OpenAiRoutes::completions(const httplib::Request& request, httplib::Response& response) {
  generate(request, response, Endpoint::kCompletions);
}

void OpenAiRoutes::chat_completions(const httplib::Request& request, httplib::Response& response) {
  generate(request, response, Endpoint::kChatCompletions);
}

OpenAiRoutes::OpenAiRoutes(GenerationService& service, const HttpOptions& options)
    : service_(service),
      options_(options),
      tool_call_format_(tool_call_format_named(options.tool_call_parser)),
      reasoning_format_(reasoning_format_named(options.reasoning_parser)),
      cors_(options.cors_allowed_origins, options.cors_allow_credentials),
      responses_(options.responses_store_bytes),
      responses_kept_(metrics_
                          .gauge("headway_responses_kept",
                                 "Responses API responses this HTTP frontend keeps (store true)")
                          .with({})),
      responses_kept_bytes_(metrics_
                                .gauge("headway_responses_kept_bytes",
                                       "Bytes of JSON of the kept Responses API responses (bounded "
                                       "by [server] responses_store_mb)")
                                .with({})),
      responses_pushed_out_(metrics_
                                .counter("headway_responses_pushed_out_total",
                                         "Kept responses forgotten to make room for newer ones")
                                .with({})) {
  if (!options.tool_call_parser.empty() && !tool_call_format_) {
    throw std::invalid_argument("unknown tool call parser \"" + options.tool_call_parser +
                                "\" (allowed: hermes, llama3_json, pythonic, mistral)");
  }
  if (!options.reasoning_parser.empty() && !reasoning_format_) {
    throw std::invalid_argument("unknown reasoning parser \"" + options.reasoning_parser +
                                "\" (allowed: deepseek_r1, qwen3)");
  }
}

void OpenAiRoutes::install(httplib::Server& server,
                           const std::function<void(const httplib::Request&)>& body_read) {
  const std::vector<Route>& table = routes();
  using Registrar =
      httplib::Server& (httplib::Server::*)(const std::string&, httplib::Server::Handler);
  const std::vector<std::pair<std::string, Registrar>> methods = {
      {"GET", &httplib::Server::Get},       {"POST", &httplib::Server::Post},
      {"PUT", &httplib::Server::Put},       {"PATCH", &httplib::Server::Patch},
      {"DELETE", &httplib::Server::Delete}, {"OPTIONS", &httplib::Server::Options},
  };
  // A known path with the wrong method is 405, not the 404 of an unknown path.
  const auto wrong_method = [](const httplib::Request& request, httplib::Response& response,
                               const std::string& allowed) {
    response.set_header("Allow", allowed);
    send_error(response, ApiError(405, "method " + request.method + " is not allowed on " +
                                           request.path + "; use " + allowed));
  };
  std::map<std::string, std::string> allowed_methods;  // path -> its methods ("GET, DELETE")
  for (const Route& route : table) {
    std::string& allowed = allowed_methods[route.path];
    allowed += (allowed.empty() ? "" : ", ") + std::string(route.method);
  }
  for (const auto& path_methods : allowed_methods) {
    const std::string& path = path_methods.first;
    for (const auto& [method, registrar] : methods) {
      const auto own =
          std::find_if(table.begin(), table.end(), [&, &name = method](const Route& route) {
            return route.path == path && route.method == name;
          });
      if (own != table.end()) {
        (server.*registrar)(path, guarded([this, handle = own->handle](
                                              const httplib::Request& rq,
                                              httplib::Response& rs) { (this->*handle)(rq, rs); },
                                          body_read));
        continue;
      }
      // A browser's preflight asks before it sends a request of one of the path's methods.
      (server.*registrar)(path,
                          guarded(
                              [this, wrong_method, allowed = path_methods.second](
                                  const httplib::Request& request, httplib::Response& response) {
                                if (cors_.is_preflight(request)) {
                                  cors_.answer_preflight(request, response, allowed);
                                } else {
                                  wrong_method(request, response, allowed);
                                }
                              },
                              body_read));
    }
  }

  // cpp-httplib calls this for every status >= 400, ours included: only an empty body (an error
  // it produced itself: malformed request, unknown route, body too large) is filled in.
  // "A, B and C": the routes, for a 404's message.
  const std::vector<std::string> names = route_names();
  std::string route_list;
  for (size_t i = 0; i < names.size(); ++i) {
    route_list += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [wrong_method, allowed_methods, route_list](const httplib::Request& request,
                                                  httplib::Response& response) {
        if (!response.body.empty() || response.content_provider_) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        // A POST to a GET route without a body fails in cpp-httplib before routing (it wants a
        // length): still the wrong method, not a malformed request.
        for (const auto& [pattern, allowed] : allowed_methods) {
          if (response.status == 400 && route_matches(pattern, request.path) &&
              allowed.find(request.method) == std::string::npos) {
            wrong_method(request, response, allowed);
            return httplib::Server::HandlerResponse::Handled;
          }
        }
        send_error(response, ApiError(response.status,
                                      library_error_message(request, response.status, route_list)));
        return httplib::Server::HandlerResponse::Handled;
      }));
  // After every handler and error handler, errors included (a 401 a browser's script must read;
  // a 405 or a preflight on a generation route still carries its client's id back).
  server.set_post_routing_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        cors_.add_response_headers(request, response);
        if (request.path == "/v1/completions" || request.path == "/v1/chat/completions" ||
            request.path == "/v1/responses") {
          echo_request_id(request, response);
        }
      });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, const std::exception_ptr&) {
        send_error(response, ApiError(500, "internal error"));
      });
}

bool OpenAiRoutes::refused_before_body(const httplib::Request& request,
                                       httplib::Response& response) const {
  // Two lengths frame the body two ways; cpp-httplib took the first, a proxy in front may take
  // the other and see another request in the rest (request smuggling). RFC 9112 6.3: refuse.
  const std::string length = request.get_header_value("Content-Length");
  if (request.get_header_value_count("Content-Length") > 1 ||
      length.find(',') != std::string::npos) {
    send_error(response, ApiError(400, "a request with more than one Content-Length is refused"));
    response.set_header("Connection", "close");
    return true;
  }
  const std::string encoding = request.get_header_value("Transfer-Encoding");
  if (encoding.empty() || encoding == "identity") return false;
  send_error(response, ApiError(411, "a request body sent with Transfer-Encoding: " + encoding +
                                         " is not accepted: send it with a Content-Length (at "
                                         "most " +
                                         std::to_string(kHttpMaxBodyBytes) + " bytes)"));
  response.set_header("Connection", "close");
  return true;
}

bool OpenAiRoutes::authorized(const httplib::Request& request, httplib::Response& response) const {
  cors_.check_origin(request);
  if (options_.api_key.empty()) return true;
  const std::string header = request.get_header_value("Authorization");
  if (check_bearer(header, options_.api_key) == BearerCheck::kMatches) return true;
  service_.count_unauthorized_request();
  response.set_header("WWW-Authenticate", "Bearer");
  send_error(response,
             ApiError(401, header.empty()
                               ? "missing API key: send the header \"Authorization: Bearer <key>\""
                               : "invalid API key in the Authorization header"));
  return false;
}

void OpenAiRoutes::generate(const httplib::Request& request, httplib::Response& response,
                            Endpoint endpoint) {
  if (!authorized(request, response)) return;
  auto ticket = in_flight_.enter();
  if (!ticket) throw ApiError(503, "the server is shutting down");

  OpenAiRequest parsed;
  try {
    refuse_multipart(request);
    parsed = endpoint == Endpoint::kCompletions ? parse_completion_request(request.body)
                                                : parse_chat_request(request.body);
    take_header_request_id(request, endpoint == Endpoint::kCompletions ? "cmpl-" : "chatcmpl-",
                           parsed);
    prepare_tool_parsing(parsed);
  } catch (const ApiError&) {
    service_.count_refused_request();  // refused here, not by submit(): counted all the same
    throw;
  }
  const ModelSummary model = service_.model_info();
  if (parsed.echo && parsed.input.sampling.logprobs >= 0 && parsed.prompt_logprobs < 0 &&
      !model.reports_prompt_logprobs) {
    // Said in the client's terms: it asked for echo, not for prompt_logprobs.
    service_.count_refused_request();
    throw invalid_field("echo",
                        "echo with logprobs lists the prompt's log-probabilities, which this "
                        "deployment's model does not report (it writes no logits row per prompt "
                        "position); send echo without logprobs");
  }
  ResponseHeader header;
  header.endpoint = endpoint;
  header.created = unix_now();
  header.model = parsed.input.model.empty() ? model.name : parsed.input.model;
  header.include_usage = parsed.include_usage;
  header.continuous_usage = parsed.continuous_usage;
  header.return_token_ids = parsed.return_token_ids;
  header.logprobs = parsed.input.sampling.logprobs >= 0;
  header.choices_per_prompt = parsed.n;
  const int32_t top_logprobs = parsed.input.sampling.logprobs;
  header.prompt_logprobs = parsed.prompt_logprobs >= 0;
  const int32_t prompt_logprobs = parsed.prompt_logprobs;
  const bool echo = parsed.echo;
  const bool echo_only = parsed.echo_only;
  std::optional<std::string> chat_echo = std::move(parsed.chat_echo);
  // Each prompt's text, for echo: as the client wrote it, or its ids' text (no special tokens),
  // which is written once the service took the prompts (so that a bad id is its refusal).
  std::vector<std::string> echo_texts;
  std::vector<std::pair<size_t, std::vector<int32_t>>> echo_ids;  // prompt index, its ids
  if (echo) {
    for (size_t p = 0; p <= parsed.more_prompts.size(); ++p) {
      const GenerateInput& prompt = p == 0 ? parsed.input : parsed.more_prompts[p - 1];
      echo_texts.push_back(prompt.prompt_text);
      if (prompt.prompt_kind == GenerateInput::PromptKind::kTokenIds) {
        echo_ids.emplace_back(p, prompt.prompt_ids);
      }
    }
  }
  const std::string model_name = parsed.input.model;

  // Each choice parses its answer with a copy of this one.
  const std::optional<AnswerParser> answer_parser =
      endpoint == Endpoint::kChatCompletions ? chat_answer_parser(parsed) : std::nullopt;

  const std::string base_id = parsed.input.request_id;
  const std::string answer_id = parsed.answer_id;
  const bool streamed = parsed.stream;
  std::vector<std::shared_ptr<RequestStream>> streams = submit_choices(std::move(parsed));
  // The id we asked for, unless the service had to assign another; with several choices, each
  // request has an id of its own and the response the one the client was given.
  header.id = !answer_id.empty() ? answer_id : streams.size() == 1 ? streams[0]->id() : base_id;
  name_answer_in_header(request, response, header.id);
  const auto abort_all = [&] {
    for (const auto& stream : streams) service_.abort(*stream);  // no-op once finished
  };
  for (const auto& [p, ids] : echo_ids) {
    try {
      echo_texts[p] = service_.detokenize(model_name, ids);
    } catch (const ServiceError& e) {
      abort_all();
      throw invalid_field("echo", std::string("echo writes each prompt's text, and the text of "
                                              "token ids cannot be had here: ") +
                                      e.what());
    }
  }

  if (!streamed) {
    std::vector<ChoiceOutput> choices;
    Usage usage;
    try {
      ClientConnectionWatch client(request.local_addr, request.local_port, request.remote_addr,
                                   request.remote_port);
      ChoiceReader reader(streams);
      std::vector<Completion> completions =
          collect_completions(service_, reader, in_flight_.stopping(), client);
      for (size_t i = 0; i < completions.size(); ++i) {
        Completion& completion = completions[i];
        // Each prompt counts once, however many choices it has (its cached tokens: its first
        // choice's).
        if (i % header.choices_per_prompt == 0) {
          usage.prompt_tokens += completion.usage.prompt_tokens;
          usage.cached_prompt_tokens += completion.usage.cached_prompt_tokens;
        }
        if (echo_only) {
          // The prompt alone: the one token generated to run it is not part of the answer.
          completion.text.clear();
          completion.token_ids.clear();
          completion.logprobs.clear();
          completion.finish = Finish::kLength;
          completion.stop_reason.emplace<std::monostate>();
        } else {
          usage.completion_tokens += completion.usage.completion_tokens;
        }
        if (echo) completion.text.insert(0, echo_texts[i / header.choices_per_prompt]);
        std::vector<ToolCall> calls;
        std::optional<std::string> reasoning;
        if (answer_parser) {
          AnswerParser parser = *answer_parser;
          parser.follow_prompt(streams[i]->prompt_reasoning());
          AnswerPieces pieces;
          parser.feed(completion.text, pieces);
          parser.finish(pieces);
          completion.text = std::move(pieces.content);
          calls = std::move(pieces.calls);
          if (parser.gives_reasoning()) reasoning = std::move(pieces.reasoning);
        }
        // After the parser, as vLLM adds it: the echoed message is content, whatever it reads like.
        if (chat_echo) completion.text.insert(0, *chat_echo);
        LogprobsJson logprobs(endpoint, top_logprobs);
        choices.push_back(ChoiceOutput{
            std::move(completion.text), std::move(completion.token_ids), completion.finish,
            completion.stop_reason,
            echo ? logprobs.echoed(completion.prompt_logprobs, completion.logprobs)
                 : logprobs.value(completion.logprobs),
            header.prompt_logprobs
                ? prompt_logprobs_json(completion.prompt_logprobs, prompt_logprobs)
                : nlohmann::ordered_json(nullptr),
            std::move(calls), std::move(reasoning), chat_echo.has_value(),
            header.return_token_ids ? std::span<const int32_t>(streams[i]->prompt_ids())
                                    : std::span<const int32_t>()});
      }
    } catch (...) {
      abort_all();
      throw;
    }
    send_json(response, 200, completion_json(header, choices, usage));
    return;
  }

  // Behind a router the engine process may still refuse the request (its queue is full): the
  // 200 waits until the request has been accepted, so that a refusal is answered with its own
  // status like a non-streamed one (a 429 makes OpenAI clients back off and retry), not as an
  // error event in a 200 stream. A local service admits at submit, and this returns at once.
  // Nothing is written during the wait, so a client that leaves is found by looking (an engine
  // process that does not say it accepted, an older one, admits only at the first token).
  wait_admitted(request, streams);
  // Borrowed: the responder keeps the streams as long as the format.
  std::vector<std::span<const int32_t>> prompt_token_ids;
  if (header.return_token_ids) {
    for (const auto& stream : streams) prompt_token_ids.emplace_back(stream->prompt_ids());
  }
  auto format = std::make_unique<ChunkStreamFormat>(header, std::move(prompt_token_ids));
  send_events(request, response,
              std::make_unique<SseResponder>(
                  service_, std::move(streams), std::move(header), top_logprobs,
                  in_flight_.stopping(), std::move(format), answer_parser,
                  StreamEcho{std::move(echo_texts), echo_only, chat_echo.value_or("")}),
              std::move(*ticket));
}

void OpenAiRoutes::prepare_tool_parsing(OpenAiRequest& parsed) const {
  if (parsed.parse_tool_calls && !parsed.forced_tool_format && !tool_call_format_) {
    // vLLM's refusal too: without a parser the calls would reach the client as plain text.
    throw invalid_field("tool_choice",
                        "tool_choice \"auto\" (the default with tools) needs the server's tool "
                        "call parser, and this server has none ([server] tool_call_parser); "
                        "send tool_choice \"none\" to have the tools in the prompt and the "
                        "answer as text");
  }
  if (parsed.parse_tool_calls && !parsed.forced_tool_format &&
      tool_call_format_ == ToolCallFormat::kMistral) {
    // Mistral's calls follow its [TOOL_CALLS] special token, which the parser must see. vLLM
    // turns skip_special_tokens off for such requests too, whatever the client sent.
    parsed.input.skip_special_tokens = false;
  }
}

std::optional<AnswerParser> OpenAiRoutes::chat_answer_parser(OpenAiRequest& parsed) const {
  // A guided chat answer from a reasoning model: the model thinks first, and the shape applies
  // after its "</think>" (which also keeps deepseek_r1's parser, which takes an answer without
  // one for all reasoning, from swallowing the answer). The service starts the shape at once
  // where the prompt already ended the reasoning, and thinks first where it opened it. Otherwise
  // Qwen3's parser takes an answer that does not open with "<think>" for all content (a model not
  // thinking): so does the guide, which then shapes it from its first token.
  const bool guided = parsed.input.guided.kind != GuidedOutput::Kind::kNone;
  // The service tells each choice where its prompt left the thinking (a template may open it, as
  // Qwen3-Thinking-2507's does, or close it), which decides what a tagless answer is.
  if (reasoning_format_) parsed.input.reasoning_end = std::string(kReasoningEnd);
  if (guided && reasoning_format_) {
    parsed.input.guided.starts_after = std::string(kReasoningEnd);
    if (*reasoning_format_ == ReasoningFormat::kQwen3) {
      parsed.input.guided.reasoning_opener = std::string(kReasoningStart);
    }
  }
  const bool split_reasoning = reasoning_format_.has_value();
  if (!parsed.parse_tool_calls && !split_reasoning) return std::nullopt;
  std::optional<ReasoningParser> reasoning;
  if (split_reasoning) reasoning.emplace(*reasoning_format_);
  std::optional<ToolCallParser> tools;
  if (parsed.forced_tool_format) {
    tools.emplace(*parsed.forced_tool_format, !parsed.parallel_tool_calls, parsed.forced_function,
                  tool_call_format_ == ToolCallFormat::kMistral);
  } else if (parsed.parse_tool_calls) {
    tools.emplace(*tool_call_format_, !parsed.parallel_tool_calls);
  }
  return AnswerParser(std::move(reasoning), std::move(tools), parsed.include_reasoning);
}

void OpenAiRoutes::wait_admitted(const httplib::Request& request,
                                 const std::vector<std::shared_ptr<RequestStream>>& streams) {
  const auto abort_all = [&] {
    for (const auto& stream : streams) service_.abort(*stream);  // no-op once finished
  };
  ClientConnectionWatch client(request.local_addr, request.local_port, request.remote_addr,
                               request.remote_port);
  // With several choices each is looked at in turn, so that a refusal of any is answered at once.
  std::vector<bool> admitted(streams.size(), false);
  for (size_t waiting = streams.size(); waiting > 0;) {
    for (size_t i = 0; i < streams.size(); ++i) {
      const auto wait = waiting == 1 ? kStreamPoll : std::chrono::milliseconds(0);
      if (admitted[i] || !streams[i]->wait_admitted(wait)) continue;
      if (std::optional<ServiceError> refusal = streams[i]->refusal()) {
        abort_all();
        throw api_error_of(*refusal);
      }
      admitted[i] = true;
      --waiting;
    }
    if (waiting == 0) break;
    if (in_flight_.stopping()) {
      abort_all();
      throw ApiError(503, "the server is shutting down; the request was aborted");
    }
    if (client.gone()) {
      abort_all();
      throw ApiError(499, "the client closed the connection; the request was aborted");
    }
    if (waiting > 1) std::this_thread::sleep_for(kChoicePoll);
  }
}

void OpenAiRoutes::send_events(const httplib::Request& request, httplib::Response& response,
                               std::unique_ptr<SseResponder> responder,
                               InFlightRequests::Ticket ticket) {
  // The ticket travels with the responder: the request stays in flight until cpp-httplib has
  // released the stream.
  struct StreamState {
    std::unique_ptr<SseResponder> responder;
    InFlightRequests::Ticket ticket;
  };
  auto state = std::make_shared<StreamState>(StreamState{std::move(responder), std::move(ticket)});
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies must not hold events back
  // cpp-httplib calls these outside any try block (the releaser from a destructor): an exception
  // escaping would terminate the process.
  auto provide = [state](size_t /*offset*/, httplib::DataSink& sink) {
    try {
      return state->responder->provide(sink);
    } catch (...) {
      return false;  // cancels the response; the releaser then aborts the request
    }
  };
  auto release = [state](bool success) noexcept {
    try {
      state->responder->release(success);
    } catch (...) {
      // The service could not abort: the request ends on its own at max_tokens.
    }
  };
  if (request.version == "HTTP/1.0" && asks_keep_alive(request)) {
    // HTTP/1.0 has no chunked encoding, and cpp-httplib keeps a 1.0 keep-alive connection (`ab
    // -k`) open after a body without a length, so its client would wait for a close that comes
    // only at the idle timeout: the events go out once generation ends, as one body with a length.
    // Nothing is written until then, so no failed write tells that the client left: its socket
    // is looked at instead, as while collecting a response that does not stream.
    ClientConnectionWatch client(request.local_addr, request.local_port, request.remote_addr,
                                 request.remote_port);
    std::string events;
    bool ended = false;
    bool gone = false;
    httplib::DataSink sink;
    make_collecting(sink, &events, ended);
    while (!ended && !(gone = client.gone()) && provide(0, sink)) {
    }
    release(ended);  // aborts the request where it did not end
    if (gone) throw ApiError(499, "the client closed the connection; the request was aborted");
    response.set_content(events, "text/event-stream");
  } else if (request.version == "HTTP/1.0") {
    // HTTP/1.0 has no chunked encoding (ApacheBench and some proxies speak only 1.0): the events
    // go out as they come, as a body without a length, ended by closing the connection.
    response.set_header("Connection", "close");
    response.set_content_provider("text/event-stream", std::move(provide), std::move(release));
  } else {
    response.set_chunked_content_provider("text/event-stream", std::move(provide),
                                          std::move(release));
  }
}

void OpenAiRoutes::respond(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  auto ticket = in_flight_.enter();
  if (!ticket) throw ApiError(503, "the server is shutting down");

  ResponsesRequest parsed;
  try {
    refuse_multipart(request);
    parsed = parse_responses_request(request.body, &responses_);
    take_header_request_id(request, "resp_", parsed.chat);
    // A kept response is never replaced by another client's choosing its id.
    if (!parsed.chat.answer_id.empty() && responses_.find(parsed.chat.answer_id) != nullptr) {
      throw invalid_field(parsed.chat.answer_id_field,
                          "a kept response already has the id \"" + parsed.chat.answer_id +
                              "\": choose another, or delete that one first");
    }
    try {
      prepare_tool_parsing(parsed.chat);
    } catch (const ApiError& error) {
      throw parsed.renames.apply(error);
    }
  } catch (const ApiError&) {
    service_.count_refused_request();
    throw;
  }
  // Shared with the format, which names a failure's field as the client wrote it.
  const auto renames = std::make_shared<const FieldRenames>(std::move(parsed.renames));
  ResponseHead head;
  head.created_at = unix_now();
  head.model =
      parsed.chat.input.model.empty() ? service_.model_info().name : parsed.chat.input.model;
  head.echo = std::move(parsed.echo);
  ResponseHeader header;
  header.endpoint = Endpoint::kResponses;
  header.logprobs = parsed.chat.input.sampling.logprobs >= 0;
  const int32_t top_logprobs = parsed.chat.input.sampling.logprobs;
  const std::optional<AnswerParser> answer_parser = chat_answer_parser(parsed.chat);
  const bool streamed = parsed.chat.stream;
  const bool store = head.echo.store;
  const std::string model_name = parsed.chat.input.model;

  const std::string answer_id = parsed.chat.answer_id;
  std::vector<std::shared_ptr<RequestStream>> streams;
  try {
    streams = submit_choices(std::move(parsed.chat));
  } catch (const ServiceError& error) {
    throw renames->apply(api_error_of(error));
  }
  // Until a responder owns it, nothing thrown may leave the request running for nobody.
  // The client's id, or the "resp_..." asked for, unless the service chose another.
  const std::string id = !answer_id.empty() ? answer_id : streams[0]->id();
  const std::shared_ptr<RequestStream> running = streams[0];  // aborted if what follows throws
  name_answer_in_header(request, response, id);
  try {
    head.id = id;
    ResponsesStreamFormat::Keep keep;
    if (store) {
      // A client's id is kept only if no other response took it meanwhile (two requests under one
      // id at once: the first to end keeps it, the other answers store false).
      keep = [this, id, replace = answer_id.empty(),
              items = std::move(parsed.input_items)](const nlohmann::ordered_json& ended) {
        return responses_.put(id, StoredResponse(ended, items), replace);
      };
    }
    auto format = std::make_unique<ResponsesStreamFormat>(
        std::move(head),
        [this, model = model_name](std::span<const int32_t> ids) {
          return service_.detokenize(model, ids);
        },
        renames, std::move(keep));
    const ResponsesStreamFormat& result = *format;
    if (streamed) {
      try {
        wait_admitted(request, streams);
      } catch (const ApiError& error) {
        throw renames->apply(error);
      }
    }
    auto responder = std::make_unique<SseResponder>(service_, std::move(streams), std::move(header),
                                                    top_logprobs, in_flight_.stopping(),
                                                    std::move(format), answer_parser);
    if (streamed) {
      send_events(request, response, std::move(responder), std::move(*ticket));
      return;
    }
    // Not streamed: the same events are built and dropped, and the answer is the response they
    // end with.
    collect_events(request, *responder);
    if (result.failed()) throw *result.failed();
    send_json(response, 200, result.response());
  } catch (...) {
    service_.abort(*running);  // a no-op once it ended
    throw;
  }
}

void OpenAiRoutes::collect_events(const httplib::Request& request, SseResponder& responder) {
  ClientConnectionWatch client(request.local_addr, request.local_port, request.remote_addr,
                               request.remote_port);
  bool ended = false;
  httplib::DataSink sink;
  make_collecting(sink, nullptr, ended);  // the events are dropped
  try {
    while (!ended) {
      // Whether tokens arrive or not: a long answer's client may give up while it is written.
      if (client.gone()) {
        throw ApiError(499, "the client closed the connection; the request was aborted");
      }
      responder.provide(sink);
    }
  } catch (...) {
    responder.release(false);  // aborts the request: nobody will read it
    throw;
  }
  responder.release(true);
}

std::shared_ptr<const StoredResponse> OpenAiRoutes::kept_response(
    const httplib::Request& request) const {
  const std::string id = request.matches[1];
  std::shared_ptr<const StoredResponse> kept = responses_.find(id);
  if (kept == nullptr) throw not_kept(id, responses_);
  return kept;
}

void OpenAiRoutes::get_response(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  if (request.get_param_value("stream") == "true") {
    throw not_supported("stream",
                        "stream (replaying a response's events: only a background response can "
                        "be replayed, and this server runs none in the background)");
  }
  response.status = 200;
  response.set_content(kept_response(request)->response_text(), kJson);  // as dump_json wrote it
}

void OpenAiRoutes::delete_response(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  const std::string id = request.matches[1];
  if (!responses_.erase(id)) throw not_kept(id, responses_);
  send_json(response, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
}

void OpenAiRoutes::list_input_items(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  const std::shared_ptr<const StoredResponse> kept = kept_response(request);
  // OpenAI's list: newest first unless order is asc, `limit` at a time, after the item `after`.
  const auto limit = static_cast<size_t>(query_integer(request, "limit", 20, 1, 100));
  if (request.has_param("before")) {
    throw not_supported("before", "before (pages go forward: after names the last item seen)");
  }
  const std::string order = request.has_param("order") ? request.get_param_value("order") : "desc";
  if (order != "asc" && order != "desc") {
    throw invalid_field("order", "order " + quote_input(order) + " is not one of asc, desc");
  }
  const nlohmann::ordered_json items = kept->input_items();
  const auto item_at = [&](size_t i) -> const nlohmann::ordered_json& {
    return order == "asc" ? items[i] : items[items.size() - 1 - i];
  };
  size_t first = 0;
  if (request.has_param("after")) {
    const std::string after = request.get_param_value("after");
    while (first < items.size() && item_at(first).value("id", "") != after) ++first;
    if (first == items.size()) {
      throw invalid_field("after", "after: no item " + quote_input(after) +
                                       " among the input items of response " +
                                       quote_input(std::string(request.matches[1])));
    }
    ++first;
  }
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (size_t i = first; i < items.size() && data.size() < limit; ++i) data.push_back(item_at(i));
  const bool more = first + data.size() < items.size();
  const nlohmann::ordered_json none = nullptr;
  send_json(response, 200,
            {{"object", "list"},
             {"data", data},
             {"first_id", data.empty() ? none : data.front().at("id")},
             {"last_id", data.empty() ? none : data.back().at("id")},
             {"has_more", more}});
}

void OpenAiRoutes::cancel_response(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  kept_response(request);  // 404 for one not kept
  throw ApiError(400,
                 "response " + quote_input(std::string(request.matches[1])) +
                     " cannot be cancelled: only a background response can, and this server "
                     "runs none in the background (this one ended as it was answered)",
                 "response_id");
}

std::vector<std::shared_ptr<RequestStream>> OpenAiRoutes::submit_choices(OpenAiRequest parsed) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  if (parsed.n == 1 && parsed.more_prompts.empty()) {
    streams.push_back(service_.submit(std::move(parsed.input)));
    return streams;
  }
  // As vLLM does: a request per prompt and choice, the choices of a prompt seeded seed + choice,
  // so that a seeded request gives the same choices every time and no two of a prompt alike.
  const std::string base_id = parsed.input.request_id;
  const uint64_t seed = parsed.input.sampling.seed;
  try {
    for (size_t p = 0; p <= parsed.more_prompts.size(); ++p) {
      for (uint32_t i = 0; i < parsed.n; ++i) {
        GenerateInput input = parsed.input;
        if (p > 0) {
          const GenerateInput& prompt = parsed.more_prompts[p - 1];
          input.prompt_kind = prompt.prompt_kind;
          input.prompt_text = prompt.prompt_text;
          input.prompt_ids = prompt.prompt_ids;
        }
        input.request_id = base_id + "-" + std::to_string(streams.size());
        input.sampling.seed = seed + i;
        try {
          streams.push_back(service_.submit(std::move(input)));
        } catch (const ServiceError& e) {
          if (e.code() == ErrorCode::kResourceExhausted) {
            refuse_choices_no_queues_hold(parsed, (parsed.more_prompts.size() + 1) * parsed.n);
          }
          // In a batch, a refusal about the prompt names which one: "prompt[2]: ...", and a
          // message that starts with its field ("prompt[0]: token id ...", the id's place) names
          // it within that prompt ("prompt[2][0]: token id ...").
          if (parsed.more_prompts.empty() || !e.param().starts_with("prompt")) throw;
          const std::string which = "prompt[" + std::to_string(p) + "]";
          const std::string param = which + e.param().substr(std::string_view("prompt").size());
          const std::string_view what = e.what();
          throw ServiceError(e.code(),
                             what.starts_with(e.param())
                                 ? param + std::string(what.substr(e.param().size()))
                                 : which + ": " + std::string(what),
                             param)
              .with_openai_code(e.openai_code());
        }
      }
    }
  } catch (...) {
    for (const auto& stream : streams) service_.abort(*stream);
    throw;
  }
  return streams;
}

void OpenAiRoutes::refuse_choices_no_queues_hold(const OpenAiRequest& parsed,
                                                 size_t choices) const {
  // Each choice is a request of its own, and they are submitted back to back, before any engine
  // step could take one out of its waiting queue.
  uint64_t places = 0;
  for (const EngineSummary& engine : service_.cluster_info().engines) {
    if (engine.max_waiting == 0) return;  // unbounded, or not reported
    places += engine.max_waiting;
  }
  if (places == 0 || choices <= places) return;
  const bool by_n = parsed.n > 1;
  throw invalid_field(
      by_n ? "n" : "prompt",
      fmt::format("{} choices ({}) wait to be admitted at once, and the engines' waiting queues "
                  "hold {} requests in all ([[engines]] max_waiting): they can never all be "
                  "admitted; ask for fewer",
                  choices,
                  parsed.more_prompts.empty() ? "n = " + std::to_string(parsed.n)
                                              : std::to_string(parsed.more_prompts.size() + 1) +
                                                    " prompts x n = " + std::to_string(parsed.n),
                  places));
}

void OpenAiRoutes::models(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  const ModelSummary model = service_.model_info();
  nlohmann::ordered_json card = {{"id", model.name},
                                 {"object", "model"},
                                 {"created", unix_now()},
                                 {"owned_by", "headway"},
                                 {"root", model.name},
                                 {"parent", nullptr},
                                 {"max_model_len", model.max_model_len}};
  // Headway's extension (neither OpenAI nor vLLM sends it): `headway bench` draws its prompt
  // token ids below it, where it would otherwise keep to ids 32-127.
  if (model.vocab > 0) card["vocab_size"] = model.vocab;
  send_json(response, 200,
            {{"object", "list"}, {"data", nlohmann::ordered_json::array({std::move(card)})}});
}

void OpenAiRoutes::tokenize(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  const GenerateInput input = parse_tokenize_request(request.body);
  const std::vector<int32_t> ids = service_.tokenize(input);
  // vLLM's shape (token_strs only when asked for, which this server does not do).
  send_json(response, 200,
            {{"count", ids.size()},
             {"max_model_len", service_.model_info().max_model_len},
             {"tokens", ids},
             {"token_strs", nullptr}});
}

void OpenAiRoutes::detokenize(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  std::string model;
  const std::vector<int32_t> ids = parse_detokenize_request(request.body, model);
  send_json(response, 200, {{"prompt", service_.detokenize(model, ids)}});
}

void OpenAiRoutes::health(const httplib::Request& /*request*/, httplib::Response& response) {
  // Open without a key: load balancers and orchestrators probe it.
  const HealthSummary health = service_.health();
  nlohmann::ordered_json body = {{"status", health.serving ? "ok" : "unavailable"},
                                 {"engines_alive", health.engines_alive},
                                 {"engines_total", health.engines_total}};
  if (!health.reason.empty()) body["reason"] = health.reason;
  send_json(response, health.serving ? 200 : 503, body);
}

void OpenAiRoutes::version(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  send_json(response, 200, {{"version", HEADWAY_VERSION}});
}

void OpenAiRoutes::metrics(const httplib::Request& request, httplib::Response& response) {
  if (!authorized(request, response)) return;
  std::string text = service_.metrics_text();
  {
    std::lock_guard lock(scrape_mutex_);
    responses_kept_.set(static_cast<double>(responses_.size()));
    responses_kept_bytes_.set(static_cast<double>(responses_.bytes()));
    responses_pushed_out_.add(static_cast<double>(responses_.pushed_out()) -
                              responses_pushed_out_.value());
    text += metrics_.render();
  }
  response.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace headway::serving::http
