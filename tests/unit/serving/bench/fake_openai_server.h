// A fake OpenAI-compatible completion server for the bench tests: an httplib::Server on a free
// loopback port that records every request it receives and answers POST /v1/completions as a
// streaming server does (one SSE chunk per token, the include_usage chunk, "data: [DONE]"), or
// misbehaves in a chosen way per request class. Nothing here sleeps: the tests assert counts,
// contents and order, never durations.
//
// Ownership: owns its server thread, joined by the destructor. Threading: the server answers on
// its own threads; received(), set_behaviour() and release_held() are safe from any thread.
#pragma once

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "listening_server.h"

namespace headway::test {

enum class FakeBehaviour {
  kStream,             // one token per chunk, usage chunk, [DONE]
  kTwoTokensPerChunk,  // chunks of two tokens that carry token_ids, usage chunk, [DONE]
  kHttp503,            // an OpenAI error body with status 503
  kErrorEvent,         // one token, then an {"error": ...} chunk
  kCloseMidStream,     // one token, then the connection is dropped
  kEndWithoutDone,     // every token, then a clean end without [DONE]
  kHold,               // waits for release_held() before streaming as kStream
  kJsonBody,           // ignores "stream": a whole completion as one application/json body
};

class FakeOpenAiServer {
 public:
  FakeOpenAiServer() {
    // More threads than any test's client connections: a keep-alive connection holds one.
    server_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    server_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mutex_);
        if (!required_key_.empty() &&
            req.get_header_value("Authorization") != "Bearer " + required_key_) {
          res.status = 401;
          res.set_content(R"({"error":{"message":"invalid API key"}})", "application/json");
          return;
        }
      }
      res.set_content(R"({"object":"list","data":[{"id":"tiny","object":"model",)"
                      R"("vocab_size":320,"max_model_len":8192}]})",
                      "application/json");
    });
    server_.Post("/v1/completions",
                 [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    // A burst of the bench's connections would overflow Debian's backlog of 5 (the kernel then
    // drops or resets connections), as for Headway's own frontend.
    if (port_ <= 0 || !server_.raise_backlog(SOMAXCONN)) {
      throw std::runtime_error("the fake OpenAI server cannot listen on 127.0.0.1");
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() only stops a server that is already listening: wait for it (httplib 0.11 has no
    // wait_until_ready). The socket is bound and listening already, so clients can connect.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ~FakeOpenAiServer() {
    release_held();
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void set_behaviour(const std::string& request_class, FakeBehaviour behaviour) {
    std::lock_guard lock(mutex_);
    behaviours_[request_class] = behaviour;
  }

  // Request bodies in the order they arrived.
  std::vector<nlohmann::json> received() const {
    std::lock_guard lock(mutex_);
    return received_;
  }

  // Blocks until `count` requests are held (kHold) at once; false after 60 s (a hang guard for a
  // request that never arrives, not a timing check).
  bool wait_until_held(size_t count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60), [&] { return held_ >= count; });
  }

  void release_held() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

  // From now on the model list answers 401 unless the request carries this key.
  void require_key(std::string key) {
    std::lock_guard lock(mutex_);
    required_key_ = std::move(key);
  }

  std::string last_authorization() const {
    std::lock_guard lock(mutex_);
    return authorization_;
  }

 private:
  static std::string chunk(const std::string& text, const std::string& extra = "") {
    return "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
           "\"text\":\"" +
           text + "\"" + extra + ",\"finish_reason\":null}]}\n\n";
  }

  // With `cached`, the usage says that many prompt tokens were found cached, as Headway's does.
  static std::string usage(uint32_t prompt, uint32_t completion,
                           std::optional<uint32_t> cached = std::nullopt) {
    const std::string details =
        cached ? ",\"prompt_tokens_details\":{\"cached_tokens\":" + std::to_string(*cached) + "}"
               : "";
    return "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{"
           "\"prompt_tokens\":" +
           std::to_string(prompt) + ",\"completion_tokens\":" + std::to_string(completion) +
           ",\"total_tokens\":" + std::to_string(prompt + completion) + details + "}}\n\n";
  }

  void handle(const httplib::Request& req, httplib::Response& res) {
    nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    FakeBehaviour behaviour = FakeBehaviour::kStream;
    {
      std::lock_guard lock(mutex_);
      received_.push_back(body);
      authorization_ = req.get_header_value("Authorization");
      if (body.is_object() && body.contains("request_class") && body["request_class"].is_string()) {
        auto it = behaviours_.find(body["request_class"].get<std::string>());
        if (it != behaviours_.end()) behaviour = it->second;
      }
    }
    if (behaviour == FakeBehaviour::kHttp503) {
      res.status = 503;
      res.set_content(R"({"error":{"message":"overloaded","type":"server_error","code":503}})",
                      "application/json");
      return;
    }
    if (behaviour == FakeBehaviour::kJsonBody) {
      res.set_content(R"({"object":"text_completion","choices":[{"text":"abc"}]})",
                      "application/json");
      return;
    }
    if (behaviour == FakeBehaviour::kHold) {
      std::unique_lock lock(mutex_);
      ++held_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
    }
    const uint32_t max_tokens = body.value("max_tokens", 1u);
    const auto prompt = static_cast<uint32_t>(body.value("prompt", nlohmann::json::array()).size());
    res.set_chunked_content_provider(
        "text/event-stream", [=, sent = 0u](size_t, httplib::DataSink& sink) mutable {
          auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
          switch (behaviour) {
            case FakeBehaviour::kErrorEvent:
              write(chunk("a"));
              write("data: {\"error\":{\"message\":\"engine failed\",\"code\":500}}\n\n");
              sink.done();
              return true;
            case FakeBehaviour::kCloseMidStream:
              write(chunk("a"));
              return false;  // httplib drops the connection without the final chunk
            case FakeBehaviour::kTwoTokensPerChunk:
              while (sent < max_tokens) {
                const uint32_t n = std::min(2u, max_tokens - sent);
                write(chunk(std::string(n, 'b'),
                            n == 2 ? ",\"token_ids\":[5,6]" : ",\"token_ids\":[5]"));
                sent += n;
              }
              break;
            default:
              for (; sent < max_tokens; ++sent) write(chunk("a"));
          }
          if (behaviour != FakeBehaviour::kEndWithoutDone) {
            // The plain stream "found" half of each prompt cached; the others say nothing.
            write(usage(
                prompt, max_tokens,
                behaviour == FakeBehaviour::kStream ? std::optional(prompt / 2) : std::nullopt));
            write("data: [DONE]\n\n");
          }
          sink.done();
          return true;
        });
  }

  serving::http::ListeningServer server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, FakeBehaviour> behaviours_;
  std::vector<nlohmann::json> received_;
  std::string authorization_;
  size_t held_ = 0;
  bool released_ = false;
  std::string required_key_;
};

}  // namespace headway::test
