// One deployment, as described by its TOML file: the model, the engines with their step scheduler,
// the router and the KV transport, every plugin resolved through the registry and every option
// checked against its plugin's schema.
//
//   name = "baseline"                  # optional, shown in reports
//   plugin_dirs = ["build/plugins"]    # optional, relative to this file
//
//   [model]
//   plugin = "sim"                     # short name, reverse-DNS name or path to a .so
//   options = { gpu = "h100", model = "llama-3.3-70b", tensor_parallel = 4 }
//
//   [[engines]]                        # one table per group of identical engines
//   count = 2                          # default 1
//   pool = "short"                     # optional; routers may use it
//   role = "mixed"                     # mixed | prefill | decode
//   block_size = 16                    # tokens per KV block
//   kv_blocks = 0                      # 0: as many as the model's memory holds; never more, when
//                                      # the model says how much that is
//   max_model_len = 0                  # 0: the model's
//   max_waiting = 0                    # waiting-queue bound; 0: unbounded
//   prefix_caching = true              # reuse the KV of prompt beginnings computed before
//                                      # (requests with token ids; docs/serving.md)
//   moved_kv_blocks = "all"            # a request whose KV moves here reserves "all" the blocks
//                                      # it may need, or "as_needed": those its KV fills, growing
//                                      # as it decodes (docs/serving.md)
//   scheduler = { plugin = "chunked", options = { max_num_batched_tokens = 8192 } }
//   model_options = { tensor_parallel = 8 }  # over [model]'s options, for these engines only (a
//                                      # prefill pool sized apart from the decode engines); the
//                                      # model itself must stay the same (checked by the cluster)
//   address = "10.0.0.7:50061"         # router processes only: the engine process's gRPC address
//
//   [router]                           # optional; default "single" for one engine,
//   plugin = "least_loaded"            # "least_loaded" otherwise
//
//   [kv_transport]                     # optional
//   plugin = "host_copy"
//
//   [server]                           # optional; `headway serve` only (docs/serving.md)
//   host = "127.0.0.1"                 # address the frontends bind
//   http_port = 8000                   # 0: an ephemeral port (logged at start)
//   grpc_port = 50051                  # 0: an ephemeral port
//   api_key_env = "HEADWAY_API_KEY"    # name of the environment variable holding the key
//   drain_timeout_s = 30.0             # on SIGTERM: how long in-flight requests may finish
//   role = "all"                       # all: frontends + router + engines in this process;
//                                      # engine: the engines, behind the gRPC worker API;
//                                      # router: frontends + router before engine processes
//   load_report_interval_s = 0.05      # router: how often it polls each engine's health and load
//   engine_connect_timeout_s = 30.0    # router: how long start-up waits for the engine processes
//   log_stats_interval_s = 10.0        # a stats line on stderr this often while busy; 0: none
//   tool_call_parser = "hermes"        # tool calls in chat answers: hermes, llama3_json,
//                                      # pythonic, mistral
//   reasoning_parser = "qwen3"         # thinking apart in chat answers: deepseek_r1 or qwen3
//   responses_store_mb = 256           # Responses API: MiB of the newest responses kept; 0: none
//   cors_allowed_origins = ["https://chat.example.com"]  # browser pages that may call the HTTP
//                                      # frontend ("*": every page); default none
//   cors_allow_credentials = false     # browsers may also send cookies / HTTP auth (not with "*")
//
// Ownership: a DeploymentConfig owns its option values; plugin pointers are owned by the registry
// (which outlives it). Threading: immutable after load.
#pragma once

#include <headway/abi.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace headway::core {

struct PluginChoice {
  std::string where;  // "deploy.toml: engines[0].scheduler", for messages
  const LoadedPlugin* plugin = nullptr;
  std::shared_ptr<const PluginOptions> options;
};

struct EngineConfig {
  uint32_t index = 0;
  std::string name;  // "engine0", …
  std::string pool;
  int32_t role = HW_ENGINE_ROLE_MIXED;
  uint32_t block_size = 16;
  uint32_t kv_blocks = 0;
  uint32_t max_model_len = 0;
  uint32_t max_waiting = 0;
  bool prefix_caching = true;
  // What a request whose KV moves here (prefill/decode disaggregation) reserves when it arrives.
  enum class MovedKvBlocks {
    kAll,       // every block of its prompt and max_tokens: it never needs another, so KV pressure
                // never preempts it here (TensorRT-LLM's GUARANTEED_NO_EVICT)
    kAsNeeded,  // the blocks its KV and next token fill; more as it decodes, like a request
                // prefilled here, so under KV pressure it may be preempted and recomputed here
  };
  MovedKvBlocks moved_kv_blocks = MovedKvBlocks::kAll;
  PluginChoice scheduler;
  // The deployment's [model] with this engine group's model_options laid over its options; unset:
  // the deployment's model as written. model_of() picks.
  std::optional<PluginChoice> model;
  std::string address;  // a router process's engine: host:port of its gRPC worker API
};

// How `headway serve` exposes the deployment. The API key itself never appears in the file: only
// the name of the environment variable that holds it.
struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t http_port = 8000;
  uint16_t grpc_port = 50051;
  std::string api_key_env;  // empty: no key required
  // The model name clients send and answers carry (vLLM's --served-model-name); empty: the
  // checkpoint directory's name, else the deployment's name.
  std::string served_model_name;
  double drain_timeout_s = 30.0;
  std::string role = "all";  // "all", "engine" or "router" (see the file comment)
  double load_report_interval_s = 0.05;
  double engine_connect_timeout_s = 30.0;
  // Seconds between `headway serve`'s stats lines (throughput, running, waiting, KV use; none
  // while idle); 0: no stats lines.
  double log_stats_interval_s = 10.0;
  // Engine processes: how a kv_source stage reaches this process: "auto" (shared memory when it
  // was written on this host, the gRPC socket otherwise) or "socket" (always the socket).
  std::string kv_stage_transport = "auto";
  // Engine processes: checksum each chunk of staged KV sent over the socket. When the file does
  // not say, read_server() turns it on in debug builds.
  bool kv_stage_checksums = false;
  // Engine processes that prefill: how a prefilled request's KV waits for its decode process:
  // "stage" (copied into shared memory, read or fetched from there) or "link" (kept in the
  // engine's KV memory and pulled by the decode process over a peer link of the two processes' KV
  // transports, e.g. NCCL between their GPUs; both need a [kv_transport] with peer links).
  std::string kv_handoff = "stage";
  // kv_handoff = "link": seconds held KV waits for its pull before its blocks are freed.
  double kv_link_hold_s = 30.0;
  // How the model writes tool calls (vLLM's --tool-call-parser): "hermes", "llama3_json",
  // "pythonic" or "mistral"; the HTTP frontend then answers chat requests with tools with OpenAI
  // tool calls. Empty: none.
  std::string tool_call_parser;
  // How a reasoning model marks its thinking (vLLM's --reasoning-parser): "deepseek_r1" or
  // "qwen3"; chat answers then carry it apart, as "reasoning". Empty: none.
  std::string reasoning_parser;
  // The Responses API's store: MiB of JSON of the newest responses kept (store true) for GET
  // /v1/responses/{id} and previous_response_id; 0: none is kept.
  uint32_t responses_store_mb = 256;
  // Browser clients (CORS): the origins whose pages' scripts may call the HTTP frontend, or "*";
  // empty: none. Credentials: the browser's cookies and HTTP authentication too (not with "*").
  std::vector<std::string> cors_allowed_origins;
  bool cors_allow_credentials = false;
};

struct DeploymentConfig {
  std::filesystem::path file;
  std::string name;
  PluginChoice model;
  // [model] tokenizer: the directory `serve` reads the tokenizer, chat template and end tokens
  // from (as vLLM's --tokenizer), relative paths resolved against the file's directory; empty:
  // the model's `path` option.
  std::filesystem::path tokenizer;
  std::vector<EngineConfig> engines;
  PluginChoice router;
  std::optional<PluginChoice> kv_transport;
  ServerConfig server;  // defaults when the file has no [server] table
};

// Reads and checks a deployment file. Throws Error naming the file, the table path, the key and
// what is allowed on any problem (syntax, unknown key, wrong type, range, unknown plugin).
DeploymentConfig load_deployment(const std::filesystem::path& file, PluginRegistry& registry);

// Same, from TOML text (file is used for messages and relative paths).
DeploymentConfig parse_deployment(std::string_view text, const std::filesystem::path& file,
                                  PluginRegistry& registry);

// Throws Error naming `where` unless `name` can be a served model name ([server]
// served_model_name, serve --served-model-name): not empty, no control characters.
void check_served_model_name(const std::string& name, const std::string& where);

// The model an engine runs: its own (model_options) or the deployment's.
inline const PluginChoice& model_of(const DeploymentConfig& deployment,
                                    const EngineConfig& engine) {
  return engine.model ? *engine.model : deployment.model;
}

}  // namespace headway::core
