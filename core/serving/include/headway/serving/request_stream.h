// One in-flight request's output, handed from the thread that generates it (an engine loop, or a
// router's connection to an engine process) to the one frontend thread that sends it to the client.
//
// The producer's calls take a short mutex and never block on the consumer, so an engine thread can
// publish tokens between steps without waiting on a slow client. Text is decoded on the consumer's
// thread, not the engine's: next() runs the request's IncrementalDecoder over the new ids.
//
// Ownership: shared (std::shared_ptr) by the service and the frontend; the decoder and the stop
// callback are owned by the stream. Threading: push_tokens/finish/admit from one producer thread at
// a time; next()/wait_admitted() from one consumer thread at a time; both may run concurrently.
#pragma once

#include <headway/core/token_logprobs.h>
#include <headway/serving/incremental_decoder.h>
#include <headway/serving/service_error.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace headway::serving {

enum class Finish {
  kNone,    // still running
  kLength,  // max_tokens (or max_model_len) reached
  kStop,    // a stop token or stop string
  kAbort,   // aborted by the client, by a disconnect or by a drain timeout
  kError,   // failed (engine down, ...): see StreamChunk::error
  // Prefilled for a decode engine in another process (a router's prefill_only request): its KV
  // waits in StreamChunk::kv_stage. Never seen by HTTP clients.
  kHandoff,
};

// "length", "stop", "abort", "error"; "" for kNone.
const char* finish_name(Finish finish);

// Where a chat prompt's end leaves a reasoning model's thinking (GenerateInput::reasoning_end):
// open (Qwen3-Thinking-2507's, QwQ's and DeepSeek-R1's templates end the prompt with "<think>\n",
// so the answer thinks from its first token without the tag), ended (Qwen3's template with
// enable_thinking off closes it in the prompt: the answer is all content), or neither (the
// answer's own first token tells).
enum class PromptReasoning { kNone, kEnded, kOpen };

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  // Of prompt_tokens, those whose KV was found in the engine's prefix cache (not computed).
  uint32_t cached_prompt_tokens = 0;
};

struct Timings {
  double queue_seconds = 0.0;  // arrival until first scheduled
  double ttft_seconds = 0.0;   // arrival until first token
  double e2e_seconds = 0.0;    // arrival until finish
  double kv_transfer_seconds = 0.0;
  // After its prefill, how long its KV waited for room on the decode engine (until its blocks there
  // were reserved; moved_kv_blocks = "all" makes this seconds where the decode engine runs full).
  // 0 for a request whose KV did not move.
  double kv_wait_seconds = 0.0;
  uint64_t kv_network_bytes = 0;  // of its KV, fetched from another host (0: not over the network)
  // Its KV moved into the engine that finished it (kv_transfer_seconds may be 0: every block was
  // in that engine's prefix cache), and of that KV the tokens the cache held (not copied).
  bool kv_moved = false;
  uint32_t kv_cached_tokens = 0;
};

// Disaggregation across processes: a prefilled request's KV blocks, back to back in a POSIX
// shared-memory object on the prefill process's host, for the process that decodes it. On that
// host the decode process reads and unlinks the object; on another it fetches the bytes first
// (FetchKvStage from source_address; the prefill process then unlinks it).
struct KvStage {
  std::string shm_name;          // "/headway-kv-..."
  uint32_t computed_tokens = 0;  // positions whose KV it holds
  uint32_t block_count = 0;
  uint64_t block_bytes = 0;  // bytes of one block (every layer's K and V)
  uint32_t block_size = 0;   // tokens per block on the engine that wrote it
  // The shape of the model whose KV it is (hw_model_info of the engine that wrote it): another
  // model can have the same bytes per block (4 layers of 8 KV heads, 8 of 4) and would decode on
  // KV it cannot read. 0: not said (a process from before these fields).
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  std::string source_address;  // gRPC address of the process that wrote it (set by the router)
  // The KV is held in the prefill process's engine under shm_name ([server] kv_handoff = "link"),
  // pulled over a peer link of the KV transports (kv_links.h), not in shared memory.
  bool held = false;

  // Only in the decode process, never on the wire:
  // The object's bytes, fetched from another host; set: read these instead of shm_name.
  std::shared_ptr<const std::vector<unsigned char>> fetched;
  double fetch_seconds = 0.0;  // how long fetching them took
  // Why the stage cannot be used (its fetch failed): the request is prefilled here instead.
  std::string unusable;
};

// One token in a request's logprobs: its id, log-probability and the bytes of its text alone
// (IncrementalDecoder::token_bytes; empty without a tokenizer).
struct TokenCandidate {
  int32_t token = 0;
  float logprob = 0.0f;
  std::string bytes;
};

// A generated token's log-probabilities, when the request asked for them
// (SamplingParams::logprobs): its own, and the most likely tokens', most likely first.
struct GeneratedLogprobs {
  TokenCandidate chosen;
  std::vector<TokenCandidate> top;
};

// A prompt token's log-probabilities, when the request asked for them (SamplingParams::
// prompt_logprobs): how likely the model found it after the tokens before it, its rank there
// (1: the most likely), and the most likely tokens there, most likely first. The first prompt
// token has nothing before it: its entry has `has_figures` false and only `token` set.
struct PromptLogprobs {
  uint32_t position = 0;
  bool has_figures = true;
  TokenCandidate token;
  uint32_t rank = 0;
  std::vector<TokenCandidate> top;
};

struct StreamChunk {
  std::vector<int32_t> token_ids;           // tokens since the previous chunk
  std::vector<GeneratedLogprobs> logprobs;  // one per token_ids entry, when they were asked for
  // Prompt tokens' figures since the previous chunk, in position order (position 0 first), when
  // they were asked for (expect_prompt_logprobs()); all of them come before the first token.
  std::vector<PromptLogprobs> prompt_logprobs;
  std::string text;               // text that became final since the previous chunk
  Finish finish = Finish::kNone;  // set on the last chunk only
  StopReason stop_reason;         // kStop: the stop string or stop token id, when one ended it
  std::string error;              // kError: what failed, for the client
  // kError: set when the service that was to run the request refused it (an engine process's
  // full queue, a request it finds invalid): frontends answer the refusal's code, not a 500.
  std::optional<ServiceError> refusal;
  Usage usage;                      // on the last chunk
  Timings timings;                  // on the last chunk
  std::optional<KvStage> kv_stage;  // kHandoff: where the KV waits
};

class RequestStream {
 public:
  // `decoder` may be null (token ids only). `on_stop_string` is called (on the consumer's thread)
  // when the decoder matches a stop string, so the service can abort the request upstream.
  // `admitted`: false when the service that is to run the request has yet to accept it (a router,
  // whose engine process may still refuse it); the producer then calls admit() or refuse().
  RequestStream(std::string id, uint32_t prompt_tokens, std::unique_ptr<IncrementalDecoder> decoder,
                std::function<void(const std::string& id)> on_stop_string, bool admitted = true);
  ~RequestStream();
  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;

  const std::string& id() const { return id_; }
  uint32_t prompt_tokens() const { return prompt_tokens_; }
  // The prompt's ids as run, when the request asked for them (GenerateInput::return_prompt_ids);
  // empty otherwise. Set by the service before it hands the stream out, constant afterwards.
  const std::vector<int32_t>& prompt_ids() const { return prompt_ids_; }
  void set_prompt_ids(std::vector<int32_t> ids) { prompt_ids_ = std::move(ids); }
  // Where the prompt left the thinking, when the request asked (GenerateInput::reasoning_end);
  // kNone otherwise. Set by the service before it hands the stream out, constant afterwards.
  PromptReasoning prompt_reasoning() const { return prompt_reasoning_; }
  void set_prompt_reasoning(PromptReasoning where) { prompt_reasoning_ = where; }
  // The producer's note_cached_prompt_tokens(), 0 before it.
  uint32_t cached_prompt_tokens() const;

  // --- producer ---
  // `logprobs`: empty, or one per id (the request asked for them; any other count is dropped, so
  // that later tokens are not paired with earlier tokens' figures); copied. A request's producer
  // pushes all its tokens with them or all without.
  void push_tokens(std::span<const int32_t> ids,
                   std::span<const core::SampledLogprobs> logprobs = {});
  // The request asked for its prompt's log-probabilities and its prompt starts with
  // `first_token`: the consumer gets position 0's entry (which has no figures) with the first
  // chunk, even when the prompt has no other token. Call before the producer starts.
  void expect_prompt_logprobs(int32_t first_token);
  // Prompt tokens' figures, in position order; copied. A position handed over before is dropped
  // (a request computed again after a preemption, or on another engine, reports its prompt
  // again), and pushes after the first token are ignored.
  void push_prompt_logprobs(std::span<const core::PromptTokenLogprobs> entries);
  // The last call for a request; later pushes are ignored. Timings are filled by the producer.
  void finish(Finish reason, Timings timings, std::string error = {},
              std::optional<KvStage> kv_stage = std::nullopt);
  // The last call for a request refused before its first token by the service that was to run it:
  // a kError finish that carries `refusal`.
  void refuse(ServiceError refusal, Timings timings);
  // The service that runs the request has accepted it: it will not be refused any more.
  void admit();
  // How many prompt tokens the engine found in its prefix cache when it first scheduled the
  // request; reported in every usage from then on (an engine in this process says it with the
  // first token, an engine process behind a router with its last message).
  void note_cached_prompt_tokens(uint32_t tokens);

  // --- consumer ---
  // Waits up to `timeout` for new tokens or the finish. A kHandoff finish hands the consumer the
  // staged KV (it must pass it on or remove it); a stream destroyed with its stage not taken
  // removes the object itself. Returns true with `out` filled when
  // something arrived; false on timeout (`out` cleared). After the chunk that carries the finish,
  // every later call returns false immediately.
  bool next(StreamChunk& out, std::chrono::milliseconds timeout);
  // True once the consumer has been handed the finishing chunk.
  bool done() const;
  // Waits up to `timeout` until the request was admitted, has output, or ended (refused or not).
  // Returns false on timeout. A frontend whose reply status goes out before the output (an HTTP
  // stream's 200) waits for this first, so that a refusal can still be answered with its code.
  bool wait_admitted(std::chrono::milliseconds timeout);
  // The refusal the stream ended with, if it was refused (refuse()); without consuming anything.
  std::optional<ServiceError> refusal() const;

 private:
  // Moves the taken log-probabilities into `out` (after its token_ids), with each token's bytes.
  void take_logprobs(StreamChunk& out);
  // The same for the taken prompt figures, after position 0's entry when `first_prompt_token`.
  void take_prompt_logprobs(StreamChunk& out, std::optional<int32_t> first_prompt_token);
  // Whether the producer left something for the consumer (under mutex_).
  bool has_news() const {
    return !pending_.empty() || !pending_prompt_.empty() || finish_ != Finish::kNone;
  }

  const std::string id_;
  const uint32_t prompt_tokens_;
  std::vector<int32_t> prompt_ids_;
  PromptReasoning prompt_reasoning_ = PromptReasoning::kNone;
  std::unique_ptr<IncrementalDecoder> decoder_;  // consumer thread only
  std::function<void(const std::string&)> on_stop_string_;

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<int32_t> pending_;  // pushed, not yet handed out
  // Their log-probabilities (when pushed with them): pending_logprobs_[i] for pending_[i], whose
  // top tokens are the next pending_top_counts_[i] entries of pending_top_.
  std::vector<float> pending_logprobs_;
  std::vector<uint32_t> pending_top_counts_;
  std::vector<core::TokenLogprob> pending_top_;
  // Prompt figures pushed, not yet handed out; their top tokens owned, since the engine's are
  // valid for the call only.
  struct PromptFigures {
    core::PromptTokenLogprobs figures;  // .top is empty: the tokens are in `top`
    std::vector<core::TokenLogprob> top;
  };
  std::vector<PromptFigures> pending_prompt_;
  std::vector<PromptFigures> taken_prompt_;
  uint32_t next_prompt_position_ = 1;  // positions below were handed over
  // expect_prompt_logprobs(): the first prompt token, until its entry is handed out.
  std::optional<int32_t> first_prompt_token_;
  Finish finish_ = Finish::kNone;
  Timings timings_;
  std::string error_;
  std::optional<ServiceError> refusal_;
  std::optional<KvStage> kv_stage_;
  bool kv_stage_taken_ = false;     // handed to the consumer, which then owns removing it
  uint32_t completion_tokens_ = 0;  // every token pushed (usage)
  uint32_t delivered_tokens_ = 0;   // consumer side: ids handed out by next()
  uint32_t cached_prompt_tokens_ = 0;
  bool admitted_;
  bool delivered_finish_ = false;
  bool stop_string_hit_ = false;  // consumer side: the decoder matched a stop string
  std::vector<int32_t> taken_;    // consumer scratch, reused
  std::vector<float> taken_logprobs_;
  std::vector<uint32_t> taken_top_counts_;
  std::vector<core::TokenLogprob> taken_top_;
};

}  // namespace headway::serving
