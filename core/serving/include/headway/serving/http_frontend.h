// The OpenAI-compatible HTTP frontend: POST /v1/completions, /v1/chat/completions and
// /v1/responses (JSON or SSE streams; the responses kept for GET, DELETE and previous_response_id),
// GET /v1/models, /health and Prometheus /metrics, in front of a GenerationService.
// It parses and validates the wire format only; tokenization, sampling checks and stop strings are
// the service's. The endpoints, the fields accepted or refused and the error mapping are in
// docs/serving_http.md.
//
// Capacity: requests are served by a pool of kHttpWorkerThreads threads. A streaming request holds
// one worker for its whole stream, a non-streaming one until its completion is ready, and an idle
// keep-alive connection holds one for up to 5 s; the pool is sized for 256 concurrent streams with
// room left for health checks, metrics scrapes and short requests. Connections beyond the pool wait
// for a free worker.
//
// Slow clients: a connection that takes longer than header_timeout_seconds (or more than
// header_max_bytes) to send a request's headers, or longer than body_timeout_seconds to send its
// body, is closed, so that clients sending a byte now and then cannot hold every worker; stop()
// shuts every connection's reading side, so that it never waits on a client that is still sending.
//
// Disconnects: a streaming response notices a client that went away on its next write (a token, or
// an SSE comment sent after a second of silence) and aborts the request in the service.
//
// Ownership: the frontend borrows the service, which must outlive it. Threading: start(), stop()
// and the destructor are called from one owning thread; port() from any thread after start().
#pragma once

#include <headway/serving/generation_service.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace headway::serving::http {
class ListeningServer;
class SlowClientReaper;
class OpenAiRoutes;
}  // namespace headway::serving::http

namespace headway::serving {

inline constexpr size_t kHttpWorkerThreads = 320;       // 256 streams + 64 for everything else
inline constexpr size_t kHttpMaxBodyBytes = 32u << 20;  // larger request bodies get 413

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: an ephemeral port, see HttpFrontend::port()
  std::string api_key;   // empty: no auth; else every route but /health wants "Bearer <key>"
  // Slow clients: a connection that has been sending a request's line and headers for longer than
  // this (from the first of its bytes the server read, as seen by a scan twice a second), or has
  // sent more than header_max_bytes of them, is closed. Each such connection
  // holds one of the pool's workers while it sends (cpp-httplib has no deadline of its own).
  double header_timeout_seconds = 10.0;
  uint64_t header_max_bytes = uint64_t{64} * 1024;
  // A connection still sending a request's body this long after its headers is closed (a body of
  // the 32 MiB allowed then needs 4.5 Mbit/s; a long prompt's JSON is well under 1 MiB):
  // cpp-httplib reads a body with a timeout that restarts at every byte, so a client sending a byte
  // every few seconds held a worker for as long as it liked, before its API key was checked.
  double body_timeout_seconds = 60.0;
  // How the model writes tool calls, vLLM's --tool-call-parser: "hermes", "llama3_json",
  // "pythonic" or "mistral".
  // Chat requests with tools and tool_choice "auto" get the calls parsed out of the answer;
  // empty: no parser, and such requests are refused (400). HttpFrontend's constructor throws
  // std::invalid_argument for another name.
  std::string tool_call_parser;
  // How a reasoning model marks its thinking, vLLM's --reasoning-parser: "deepseek_r1" or
  // "qwen3". Chat answers then carry the thinking apart ("reasoning"). Empty: none. Another name:
  // std::invalid_argument from HttpFrontend's constructor.
  std::string reasoning_parser;
  // The Responses API's store: the newest responses made with store true (its default), kept in
  // memory up to this many bytes of JSON, for GET /v1/responses/{id} and previous_response_id.
  // 0: none is kept (store is answered false, previous_response_id refused).
  size_t responses_store_bytes = size_t{256} << 20;
  // Browser clients (CORS): the origins whose pages' scripts may call the frontend and read its
  // answers ("https://chat.example.com"), or "*" for every origin; empty: none (no CORS headers,
  // OPTIONS is 405). Preflights are answered without the API key. allow_credentials also lets them
  // send the browser's cookies and HTTP credentials (not with "*"). A bad origin:
  // std::invalid_argument from HttpFrontend's constructor. docs/serving_http.md, "Browser clients".
  std::vector<std::string> cors_allowed_origins;
  bool cors_allow_credentials = false;
};

class HttpFrontend {
 public:
  HttpFrontend(GenerationService& service, HttpOptions options);
  // Stops the server first (see stop()).
  ~HttpFrontend();
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  // Binds and serves on background threads; returns once the server accepts connections.
  // Throws core::Error naming host:port when it cannot bind, or when already started.
  void start();

  // The bound port (also when port 0 asked for an ephemeral one); 0 before start().
  uint16_t port() const { return port_.load(); }

  // Stops accepting, aborts the requests still streaming (their clients get an error event), closes
  // the connections and joins every thread. Idempotent; a stopped frontend cannot be restarted.
  void stop();

 private:
  const HttpOptions options_;
  std::unique_ptr<http::OpenAiRoutes> routes_;
  std::unique_ptr<http::ListeningServer> server_;
  std::unique_ptr<http::SlowClientReaper> reaper_;
  std::thread listener_;
  std::atomic<uint16_t> port_{0};
  std::atomic<bool> listener_returned_{false};
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace headway::serving
