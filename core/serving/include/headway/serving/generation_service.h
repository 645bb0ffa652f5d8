// The seam between Headway's serving frontends (OpenAI-compatible HTTP, gRPC) and what generates
// tokens behind them: an in-process cluster of engines (LocalGenerationService) or, in a router
// process, engine processes reached over gRPC. Frontends speak only this interface, so each can be
// tested against a fake service and each backend serves every frontend.
//
// The service is text-aware: it tokenizes prompts (text, token ids or chat messages rendered with
// the checkpoint's chat template), validates every request against the deployment, and streams
// token ids together with their text. Frontends parse and validate their wire format only.
//
// Ownership: submit() returns a shared RequestStream; the service keeps its own reference until the
// request finishes, so a frontend may drop its reference at any time (after calling abort()).
// Threading: every GenerationService method is safe to call from any thread, concurrently.
#pragma once

#include <headway/abi.h>
#include <headway/core/engine_role.h>
#include <headway/core/sampling_params.h>
#include <headway/serving/request_stream.h>
#include <headway/serving/service_error.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving {

// Longest GenerateInput::request_id a service takes. A client's request id is repeated in every
// response message and in logs; a router sends it on to its engine processes with a suffix of its
// own, shortening the id to stay within this limit.
inline constexpr size_t kMaxRequestIdLength = 256;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  // The message's other fields, a JSON object given to the chat template as they are: an
  // assistant turn's "tool_calls" (each function's "arguments" an object, as templates read
  // them), a tool result's "tool_call_id", a "name". Empty: none.
  std::string fields_json;
};

// What the output must look like (guided decoding, as vLLM's guided_json, guided_regex,
// guided_choice and guided_grammar and OpenAI's response_format). kNone: free text.
struct GuidedOutput {
  enum class Kind { kNone, kJsonSchema, kJsonObject, kChoice, kRegex, kGrammar };
  Kind kind = Kind::kNone;
  std::string schema_json;           // kJsonSchema: the schema, JSON text
  std::vector<std::string> choices;  // kChoice: the output is exactly one of these, as written
  // kRegex: the output is text this regular expression matches whole (vLLM's guided_regex; the
  // syntax: docs/serving_http.md).
  std::string regex;
  // kGrammar: the output is text this GBNF grammar derives from its `root` rule (vLLM's
  // guided_grammar; the notation: docs/serving_http.md).
  std::string grammar;
  // The request field that asked for it, which refusals name ("response_format.json_schema.schema",
  // "guided_json", "guided_choice"); empty: "guided".
  std::string field;
  // The shape applies only after this text of the output (a reasoning model's "</think>"):
  // before it anything but an end token may come, after it up to a few blanks and the value.
  // Ignored when the prompt already ends the reasoning (it closes with this text after its last
  // opening tag, as Qwen3's template does with enable_thinking off). Empty: from the first byte.
  std::string starts_after;
  // With starts_after: the output reasons only when its first token opens with this text (Qwen3's
  // "<think>"); one that opens otherwise is all answer, the shape applying from its first byte.
  // Empty: the reasoning is open from the start (DeepSeek-R1's template opens it in the prompt).
  std::string reasoning_opener;
};

struct GenerateInput {
  std::string request_id;  // empty: the service assigns a unique one
  std::string model;       // empty or a name from model_info(); anything else is kNotFound

  // Exactly one prompt form is set; the service refuses none or several (kInvalidArgument).
  enum class PromptKind { kText, kTokenIds, kChat };
  PromptKind prompt_kind = PromptKind::kText;
  std::string prompt_text;            // kText: encoded, BOS first where the model wants one
  std::vector<int32_t> prompt_ids;    // kTokenIds: used as given
  std::vector<ChatMessage> messages;  // kChat: rendered with the chat template, then encoded
  // kChat: the functions the model may call (OpenAI's "tools"), a JSON array the chat template
  // renders into the prompt. Empty: none.
  std::string tools_json;
  // kChat: vLLM's chat_template_kwargs, more variables for the template (e.g. Qwen3's
  // enable_thinking), a JSON object. Empty: none.
  std::string template_kwargs_json;
  // kChat: vLLM's add_generation_prompt (the template writes the assistant's header after the
  // conversation) and continue_final_message (the prompt ends inside the final message, which the
  // model goes on writing; needs add_generation_prompt false).
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  // vLLM's add_special_tokens: whether the tokenizer's special tokens (its BOS, where it adds one)
  // go before the encoded text. Unset: the form's default, vLLM's: true for kText; false for kChat,
  // whose template writes them (true adds the tokenizer's on top: after a template that writes the
  // BOS, a second one, as vLLM gives). kTokenIds: ignored, the ids are used as given.
  std::optional<bool> add_special_tokens;
  // kChat: the text that ends a reasoning model's thinking ("</think>"), set where the answer is
  // split into reasoning and content (the server's reasoning parser). The service then reads the
  // prompt's end for it (RequestStream::prompt_reasoning()), since a template may open or close
  // the thinking in the prompt. Empty: not looked for.
  std::string reasoning_end;

  core::SamplingParams sampling;  // validated by the service (temperature >= 0, top_p in (0,1])
  // The service compiles it and sets sampling.guide (a guide set by the caller is replaced).
  GuidedOutput guided;
  uint32_t max_tokens = 16;  // >= 1 and prompt + max_tokens <= max_model_len
  // The client's name for max_tokens, which a refusal names (OpenAI chat's max_completion_tokens);
  // always a string literal.
  std::string_view max_tokens_field = "max_tokens";
  // The client set no limit (OpenAI chat without max_tokens): generate until max_model_len, i.e.
  // max_tokens becomes max_model_len - prompt tokens (refused when the prompt leaves no room).
  bool max_tokens_to_context_end = false;
  // vLLM's bad_words: admission encodes them (with the model's tokenizer) into
  // sampling.bad_words_ids and clears this. Empty: none.
  std::vector<std::string> bad_words;
  std::vector<std::string> stop;  // stop strings; the matched text is not returned, unless:
  bool include_stop_str_in_output = false;  // vLLM's: the matched stop string's text is returned
  // vLLM's skip_special_tokens: false writes special tokens ("<|eot_id|>", "[TOOL_CALLS]") into
  // the text; a stop token that ends the request never is.
  bool skip_special_tokens = true;
  // vLLM's truncate_prompt_tokens: keep only the encoded prompt's last N tokens (a BOS it starts
  // with stays, counted in N); -1: N is max_model_len. Unset: the whole prompt. 0, below -1 or
  // above max_model_len is kInvalidArgument.
  std::optional<int32_t> truncate_prompt_tokens;
  // The stream keeps the prompt's token ids as the request runs them (after the chat template,
  // the BOS and truncation): RequestStream::prompt_ids(), for vLLM's return_token_ids.
  bool return_prompt_ids = false;
  int32_t priority = 0;       // lower is more urgent
  std::string request_class;  // label for metrics; empty: the service derives one

  // Disaggregation across processes, set by a router process (never by an HTTP client):
  // prefill_only: compute the prompt and the first token, then stage the KV in shared memory and
  // finish with Finish::kHandoff (StreamChunk::kv_stage says where).
  bool prefill_only = false;
  // Continue a request another process prefilled: its KV waits in *kv_source, `generated_ids` are
  // the tokens it generated so far (at least one), max_tokens counts them too. When the staged KV
  // cannot be used here (gone, another layout), the prompt and those tokens are prefilled here.
  std::optional<KvStage> kv_source;
  std::vector<int32_t> generated_ids;
};

struct ModelSummary {
  std::string name;  // what clients pass as "model"
  uint32_t max_model_len = 0;
  uint32_t vocab = 0;
  std::string tokenizer;  // tokenizer kind ("byte", "bpe", ...)
  // The host can sample a request itself: the model returns logits for every token, or for the
  // requests that ask (hw_model_info.returns_logits_on_request), so penalties, min_tokens,
  // logit_bias, logprobs and guided output are served. False when the model only samples on its
  // device (they are refused).
  bool samples_on_host = true;
  // The model reads the request's token ids (hw_model_info.needs_token_ids), which the presence,
  // frequency and repetition penalties count. False: the penalties are refused (a model that
  // only needs lengths leaves the engine without the ids to count).
  bool reads_token_ids = true;
  // The service can report prompt tokens' log-probabilities (SamplingParams::prompt_logprobs): its
  // model returns a logits row per prompt position (hw_model_info.returns_prompt_logits) and reads
  // token ids. False: prompt_logprobs (and echo with logprobs) are refused.
  bool reports_prompt_logprobs = true;
  // The shape of the model's KV (hw_model_info's layers, kv_heads and head_dim): two checkpoints
  // with one vocabulary and tokenizer (Llama 3.1 8B and 70B) are not the same model, and one
  // cannot decode on the other's KV. 0: not said (a process from before these fields, or engines
  // in one process whose models differ).
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
};

// "32 layers x 8 KV heads x 128 dims", or "a KV shape it does not say" when `model` says none.
std::string kv_shape_label(const ModelSummary& model);

// EngineSummary::role for an hw_engine_role: the deployment file's name, but "both" for a mixed
// engine (what the engine summaries have always said).
inline const char* engine_role_label(int32_t role) {
  return role == HW_ENGINE_ROLE_MIXED ? "both" : core::engine_role_name(role);
}

struct EngineSummary {
  uint32_t index = 0;
  std::string pool;
  std::string role;  // "both", "prefill", "decode"
  bool alive = true;
  uint32_t running = 0;
  uint32_t waiting = 0;
  uint64_t outstanding_tokens = 0;
  uint32_t kv_blocks_free = 0;
  uint32_t kv_blocks_total = 0;
  uint64_t queued_prefill_tokens = 0;
  uint32_t block_size = 0;
  std::string address;  // a router process's engine: where its engine process listens
  // How long the engine's step now running has run, 0 between steps (and for a router process's
  // engines, which do not report it).
  double step_seconds = 0.0;
  // Since the engine started (for a router process's engine, its engine process's engines
  // together): requests preempted, and tokens looked up in and found in the prefix cache. A
  // router process adds what its engine processes report to its own /metrics.
  uint64_t preemptions = 0;
  uint64_t prefix_cache_queries = 0;
  uint64_t prefix_cache_hits = 0;
  // A router process's engine: its process's ClusterSummary::incarnation (0: not known).
  uint64_t incarnation = 0;
  // The waiting-queue bound (EngineConfig::max_waiting; for a router process's engine, its
  // process's engines' bounds added up): 0 for unbounded, or not reported.
  uint32_t max_waiting = 0;
  // Whether it caches prompt beginnings (EngineConfig::prefix_caching; for a router process's
  // engine, whether any live engine of its process does): true when not reported.
  bool prefix_caching = true;
};

// One series of a plugin's metric as the process exports it (headway_plugin_total for a counter,
// headway_plugin_value for a gauge): a router process exports its engine processes' ones.
struct PluginMetricSample {
  std::string engine;  // the engine's index in its process; empty for a router or a KV transport
  std::string pool;
  std::string kind;  // "model", "scheduler", "router", "kv_transport"
  std::string plugin;
  std::string metric;   // the plugin's name for it
  bool counter = true;  // else a gauge
  double value = 0.0;   // a counter's total since the process started, a gauge's last value
};

struct ClusterSummary {
  std::string deployment;
  std::string router;
  std::vector<EngineSummary> engines;
  // Of one process (a router process gives none: its router plugin's are in its own /metrics).
  std::vector<PluginMetricSample> plugin_metrics;
  // Drawn at random when the service started: a change tells a router the process restarted.
  uint64_t incarnation = 0;
};

// KV events (hw_kv_event, ABI 1.9) of an engine process's engine from a number on, for the router
// process that asked (ClusterInfoRequest.kv_events_from).
struct KvEventsSince {
  std::vector<hw_kv_event> events;  // oldest first
  uint64_t next = 0;                // the number to ask from next time
  bool lost = false;  // some after the number asked for are gone: forget what they built
};

// What a service has done since it started, summed over its engines: the counters behind
// `headway serve`'s periodic stats line (rates are differences of two readings). A router process
// counts what passed through it; the prefix-cache counters are its engine processes' own.
struct ServiceTotals {
  double prompt_tokens = 0.0;   // of admitted requests
  double prefill_tokens = 0.0;  // computed by engine steps (recomputation included); 0 on a router
  double generation_tokens = 0.0;  // generated
  double prefix_cache_queries = 0.0;
  double prefix_cache_hits = 0.0;
  double preemptions = 0.0;
};

struct HealthSummary {
  bool serving = false;  // false while draining or when no engine can finish a request
  uint32_t engines_alive = 0;
  uint32_t engines_total = 0;
  std::string reason;     // why not serving ("draining", ...); empty while serving
  bool draining = false;  // not admitting: finishing what it has (a router keeps its calls)
};

struct EngineHealth {
  int32_t role = HW_ENGINE_ROLE_MIXED;  // hw_engine_role
  bool alive = false;
  double step_seconds = 0.0;  // EngineSummary::step_seconds
};

// A step running this long means a model or scheduler call that does not return (the longest
// real steps, a long prompt's chunk on the CPU model, take seconds): the engine counts as not
// alive in /health, which names it, while the step goes on. The stats line names an engine
// from kSlowStepSeconds on.
inline constexpr double kStuckStepSeconds = 120.0;
inline constexpr double kSlowStepSeconds = 30.0;

// A deployment serves while it admits requests and some live engine can finish a request: a mixed
// or decode engine. Live prefill engines alone cannot (they only hand their KV on), so /health must
// not say "ok" while every request would be refused for want of a decode engine.
HealthSummary summarize_health(bool admitting, const std::vector<EngineHealth>& engines);

class GenerationService {
 public:
  virtual ~GenerationService() = default;

  // Validates, tokenizes and queues a request; tokens then arrive on the returned stream.
  // Throws ServiceError (invalid input, unknown model, full queue, draining).
  virtual std::shared_ptr<RequestStream> submit(GenerateInput input) = 0;

  // Aborts a queued or running request and frees its KV blocks; its stream finishes with
  // Finish::kAbort. Returns false when no such request is in flight (or it was aborted already).
  // The id is free again once this returns, as in vLLM: a retry may reuse it at once, though the
  // old request lets go of its engine only at the next step. Frontends call it when a client
  // disconnects.
  virtual bool abort(const std::string& request_id) = 0;
  // Aborts `stream`'s request, and nothing else: false once it ended, also when a new request has
  // taken its id since (a gRPC client that cancelled and resubmitted under the same id must not
  // have the retry aborted by the old call's handler). Frontends that hold the stream call this.
  // Default: abort(stream.id()), right only for a service that never lets an id be reused.
  virtual bool abort(const RequestStream& stream) { return abort(stream.id()); }

  virtual ModelSummary model_info() const = 0;

  // The prompt ids submit() would run for `input`'s prompt (text with the tokenizer's BOS, token
  // ids as given, chat messages through the chat template), without running anything and without
  // the context-length check: a client learns how long its prompt is. Reads the model name and
  // the prompt fields only. Throws ServiceError as submit() does for them. Default: kNotFound.
  virtual std::vector<int32_t> tokenize(const GenerateInput& input) const;
  // The text of `ids`, special tokens (BOS, a chat template's markers) left out as in generated
  // text. `model`: as GenerateInput::model. Throws ServiceError(kInvalidArgument) for an id
  // outside the vocabulary (param "tokens[i]") and when the model has no tokenizer (param
  // "tokens"); kNotFound for another model. Default: kNotFound.
  virtual std::string detokenize(const std::string& model, std::span<const int32_t> ids) const;

  virtual ClusterSummary cluster_info() const = 0;
  // The engine's KV events from number `from` on, where the service keeps them for a router
  // process (an engine process with one engine that caches prefixes); nullopt where it keeps none.
  // Any number of readers may ask: none consumes them. Default: nullopt.
  virtual std::optional<KvEventsSince> kv_events_since(uint64_t from);
  virtual HealthSummary health() const = 0;
  virtual ServiceTotals totals() const = 0;

  // Every metric in the Prometheus text exposition format (version 0.0.4).
  virtual std::string metrics_text() const = 0;
  // Counts a request its frontend refused before submit() (a body that is not JSON, a field the
  // frontend does not accept, no prompt), so that headway_request_rejected_total{reason="invalid"}
  // sees every refused request and not only those submit() refused. Default: not counted.
  virtual void count_refused_request() {}
  // Counts a call a frontend refused for a missing or wrong API key (HTTP 401, gRPC
  // UNAUTHENTICATED), as headway_request_rejected_total{reason="unauthorized"}: an operator's
  // alert on failed authentication had nothing to read. Default: not counted.
  virtual void count_unauthorized_request() {}

  // Stops admitting (submit throws kUnavailable; an engine process behind a router still takes
  // the continuations of requests admitted before, for at least a second) and returns once nothing
  // is in flight or `timeout_seconds` passed; what is still running then is aborted. Returns the
  // number aborted.
  virtual size_t drain(double timeout_seconds) = 0;
  // Makes a drain in progress (on another thread) stop waiting and abort what is in flight now,
  // as its timeout would: an operator's second SIGTERM/SIGINT. Harmless when no drain runs (a
  // later drain then aborts at once).
  virtual void end_drain_now() = 0;

  // Engine processes that hold prefilled KV for peer links ([server] kv_handoff = "link",
  // kv_link_peers.h); elsewhere both throw kUnavailable.
  // Joins `rendezvous` as rank 0 of link `link_name` (returns before the link is up).
  virtual void open_kv_link(const std::string& link_name, const std::vector<uint8_t>& rendezvous);
  // Posts the send of held KV `held` on link `link_name`, or frees it (drop). Throws kNotFound for
  // an unknown held KV, kUnavailable for an unknown or failed link, kInvalidArgument when `held`
  // does not describe it.
  virtual void send_held_kv(const std::string& link_name, const KvStage& held, bool drop);
};

namespace detail {
inline ServiceError no_held_kv() {
  return ServiceError(ErrorCode::kUnavailable,
                      "this process holds no KV for peer links (an engine process with [server] "
                      "kv_handoff = \"link\" does)");
}
}  // namespace detail
inline std::vector<int32_t> GenerationService::tokenize(const GenerateInput&) const {
  throw ServiceError(ErrorCode::kNotFound, "this service does not tokenize");
}
inline std::string GenerationService::detokenize(const std::string&,
                                                 std::span<const int32_t>) const {
  throw ServiceError(ErrorCode::kNotFound, "this service does not detokenize");
}
inline std::optional<KvEventsSince> GenerationService::kv_events_since(uint64_t) {
  return std::nullopt;
}
inline void GenerationService::open_kv_link(const std::string&, const std::vector<uint8_t>&) {
  throw detail::no_held_kv();
}
inline void GenerationService::send_held_kv(const std::string&, const KvStage&, bool) {
  throw detail::no_held_kv();
}

}  // namespace headway::serving
