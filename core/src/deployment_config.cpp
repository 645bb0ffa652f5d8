#include <fmt/format.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <headway/core/utf8.h>
#include <headway/core/web_origin.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "toml_line.h"

namespace headway::core {
namespace fs = std::filesystem;
namespace {

// The key's place for a message: "deploy.toml: engines[0]" + "block_size" gives
// "deploy.toml: engines[0].block_size", and at the top level "deploy.toml" + "name" gives
// "deploy.toml: name" (not "deploy.toml.name").
std::string key_path(const std::string& where, std::string_view key) {
  return where.find(": ") == std::string::npos ? fmt::format("{}: {}", where, key)
                                               : fmt::format("{}.{}", where, key);
}

// A value as TOML spells it (16.5, 'x'), for a message saying what was found.
std::string value_text(const toml::node& node) {
  std::ostringstream out;
  node.visit([&out](const auto& value) { out << value; });
  return out.str();
}

// Rejects keys of `table` that are not in `allowed`: typos must never be silently ignored.
void check_keys(const toml::table& table, std::initializer_list<std::string_view> allowed,
                const std::string& where) {
  for (const auto& [key, node] : table) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == key.str();
    if (!ok) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw Error(fmt::format("{}: unknown key '{}'{} (allowed: {})", where, key.str(),
                              line_of(node), list));
    }
  }
}

const toml::table* get_table(const toml::table& parent, std::string_view key,
                             const std::string& where) {
  const toml::node* node = parent.get(key);
  if (node == nullptr) return nullptr;
  if (!node->is_table()) {
    throw Error(fmt::format("{}: expected a table{}", key_path(where, key), line_of(*node)));
  }
  return node->as_table();
}

std::string get_string(const toml::table& t, std::string_view key, const std::string& where,
                       std::optional<std::string> fallback) {
  const toml::node* node = t.get(key);
  if (node == nullptr) {
    if (fallback) return *fallback;
    throw Error(fmt::format("{}: missing key '{}'", where, key));
  }
  if (!node->is_string()) {
    throw Error(fmt::format("{}: expected a string{}", key_path(where, key), line_of(*node)));
  }
  return node->as_string()->get();
}

uint32_t get_uint(const toml::table& t, std::string_view key, const std::string& where,
                  uint32_t fallback, uint32_t min, uint32_t max) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return fallback;
  if (!node->is_integer() || node->as_integer()->get() < min || node->as_integer()->get() > max) {
    throw Error(fmt::format("{}: expected an integer in [{}, {}], not {}{}", key_path(where, key),
                            min, max, value_text(*node), line_of(*node)));
  }
  return static_cast<uint32_t>(node->as_integer()->get());
}

bool get_bool(const toml::table& t, std::string_view key, const std::string& where, bool fallback) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return fallback;
  if (!node->is_boolean()) {
    throw Error(fmt::format("{}: expected true or false{}", key_path(where, key), line_of(*node)));
  }
  return node->as_boolean()->get();
}

// `plugin = "…"` plus an optional `options` table, inside `table`.
PluginChoice read_choice(const toml::table& table, int32_t kind, const std::string& where,
                         PluginRegistry& registry, const fs::path& base_dir,
                         const std::optional<std::string>& default_plugin = std::nullopt,
                         bool model_table = false) {
  if (model_table) {
    check_keys(table, {"plugin", "options", "tokenizer"}, where);
  } else {
    check_keys(table, {"plugin", "options"}, where);
  }
  std::string name = get_string(table, "plugin", where, default_plugin);
  // A relative path to a library is relative to the deployment file, like every path in it.
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".so");
  if (is_path && fs::path(name).is_relative()) {
    name = (base_dir / name).lexically_normal().string();
  }
  PluginChoice choice;
  choice.where = where;
  try {
    choice.plugin = &registry.find(name, kind);
  } catch (const Error& e) {
    throw Error(where + ".plugin: " + e.what(), e.code());
  }
  choice.options = std::make_shared<const PluginOptions>(PluginOptions::from_toml(
      *choice.plugin->descriptor, get_table(table, "options", where), where + ".options"));
  return choice;
}

// `at` names the table in messages: "deploy.toml: router", "deploy.toml: engines[0].scheduler".
PluginChoice read_inline_or_table(const toml::table& parent, std::string_view key, int32_t kind,
                                  const std::string& at, PluginRegistry& registry,
                                  const fs::path& base_dir,
                                  const std::optional<std::string>& default_plugin = std::nullopt) {
  const toml::node* node = parent.get(key);
  if (node == nullptr) {
    if (!default_plugin) throw Error(fmt::format("{}: missing table", at));
    toml::table empty;
    return read_choice(empty, kind, at, registry, base_dir, default_plugin);
  }
  if (node->is_string()) {  // shorthand: scheduler = "chunked"
    toml::table t;
    t.insert("plugin", node->as_string()->get());
    return read_choice(t, kind, at, registry, base_dir);
  }
  if (!node->is_table()) {
    throw Error(fmt::format("{}: expected a table or a plugin name{}", at, line_of(*node)));
  }
  return read_choice(*node->as_table(), kind, at, registry, base_dir, default_plugin);
}

double get_seconds(const toml::table& table, const char* key, const std::string& where,
                   double fallback, double low, double high) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return fallback;
  const std::optional<double> value = node->value<double>();
  if (!value || !(*value >= low && *value <= high)) {
    throw Error(fmt::format("{}: expected a number of seconds in [{}, {}]{}", key_path(where, key),
                            low, high, line_of(*node)));
  }
  return *value;
}

}  // namespace

void check_served_model_name(const std::string& name, const std::string& where) {
  // Clients send it in JSON and logs quote it: no empty name, no control characters.
  if (name.empty()) throw Error(where + ": must not be empty (leave it out for the default)");
  // Answers are JSON: bytes that are not UTF-8 would come back as U+FFFD, a name no client sends.
  if (!utf8::is_valid(name)) throw Error(where + ": is not valid UTF-8");
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      throw Error(fmt::format("{}: a control character (byte 0x{:02x}) at byte {} of the name",
                              where, c, i));
    }
  }
}

namespace {

ServerConfig read_server(const toml::table& table, const std::string& where) {
  if (const toml::node* key = table.get("api_key")) {
    throw Error(
        fmt::format("{}.api_key{}: the key must not be written in the file; put it in an "
                    "environment variable and name that variable with api_key_env",
                    where, line_of(*key)));
  }
  check_keys(table,
             {"host", "http_port", "grpc_port", "api_key_env", "drain_timeout_s", "role",
              "load_report_interval_s", "engine_connect_timeout_s", "kv_stage_transport",
              "kv_stage_checksums", "kv_handoff", "kv_link_hold_s", "log_stats_interval_s",
              "tool_call_parser", "reasoning_parser", "responses_store_mb", "cors_allowed_origins",
              "cors_allow_credentials", "served_model_name"},
             where);
  ServerConfig server;
  server.host = get_string(table, "host", where, server.host);
  if (server.host.empty()) throw Error(where + ".host: must not be empty");
  server.http_port = static_cast<uint16_t>(get_uint(table, "http_port", where, 8000, 0, 65535));
  server.grpc_port = static_cast<uint16_t>(get_uint(table, "grpc_port", where, 50051, 0, 65535));
  server.api_key_env = get_string(table, "api_key_env", where, "");
  bool name_ok = !server.api_key_env.empty() &&
                 !(server.api_key_env[0] >= '0' && server.api_key_env[0] <= '9');
  for (char c : server.api_key_env) {
    name_ok = name_ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '_');
  }
  if (table.get("api_key_env") != nullptr && !name_ok) {
    throw Error(
        fmt::format("{}.api_key_env: \"{}\" is not an environment variable name "
                    "([A-Za-z_][A-Za-z0-9_]*)",
                    where, server.api_key_env));
  }
  server.served_model_name = get_string(table, "served_model_name", where, "");
  if (const toml::node* node = table.get("served_model_name")) {
    check_served_model_name(server.served_model_name,
                            where + ".served_model_name" + line_of(*node));
  }
  server.drain_timeout_s =
      get_seconds(table, "drain_timeout_s", where, server.drain_timeout_s, 0.0, 3600.0);
  server.load_report_interval_s = get_seconds(table, "load_report_interval_s", where,
                                              server.load_report_interval_s, 0.005, 60.0);
  server.engine_connect_timeout_s = get_seconds(table, "engine_connect_timeout_s", where,
                                                server.engine_connect_timeout_s, 0.0, 3600.0);
  server.log_stats_interval_s =
      get_seconds(table, "log_stats_interval_s", where, server.log_stats_interval_s, 0.0, 3600.0);
  server.role = get_string(table, "role", where, "all");
  if (server.role != "all" && server.role != "engine" && server.role != "router") {
    throw Error(fmt::format("{}.role: unknown role \"{}\" (allowed: all, engine, router)", where,
                            server.role));
  }
  // How an engine process receives the KV another process prefilled (docs/serving.md).
  for (const char* key :
       {"kv_stage_transport", "kv_stage_checksums", "kv_handoff", "kv_link_hold_s"}) {
    const toml::node* node = table.get(key);
    if (node != nullptr && server.role != "engine") {
      throw Error(
          fmt::format("{}.{}{}: only for engine processes (role = \"engine\"), which "
                      "send and receive staged KV; this one has role \"{}\"",
                      where, key, line_of(*node), server.role));
    }
  }
  server.kv_stage_transport = get_string(table, "kv_stage_transport", where, "auto");
  if (server.kv_stage_transport != "auto" && server.kv_stage_transport != "socket") {
    throw Error(
        fmt::format("{}.kv_stage_transport: unknown transport \"{}\" (allowed: auto "
                    "(shared memory on one host, the socket between hosts), socket)",
                    where, server.kv_stage_transport));
  }
#ifdef NDEBUG
  constexpr bool kChecksumsByDefault = false;
#else
  constexpr bool kChecksumsByDefault = true;  // debug builds check every chunk of KV between hosts
#endif
  server.kv_stage_checksums = get_bool(table, "kv_stage_checksums", where, kChecksumsByDefault);
  server.kv_handoff = get_string(table, "kv_handoff", where, server.kv_handoff);
  if (server.kv_handoff != "stage" && server.kv_handoff != "link") {
    throw Error(fmt::format(
        "{}.kv_handoff: unknown value \"{}\" (allowed: stage (KV copied into shared memory), link "
        "(KV kept in the engine and pulled over a peer link of the KV transports))",
        where, server.kv_handoff));
  }
  server.kv_link_hold_s =
      get_seconds(table, "kv_link_hold_s", where, server.kv_link_hold_s, 0.01, 3600.0);
  // The HTTP frontend parses tool calls out of chat answers (docs/serving_http.md, "Tool calls").
  server.tool_call_parser = get_string(table, "tool_call_parser", where, "");
  if (const toml::node* node = table.get("tool_call_parser")) {
    if (server.tool_call_parser != "hermes" && server.tool_call_parser != "llama3_json" &&
        server.tool_call_parser != "pythonic" && server.tool_call_parser != "mistral") {
      throw Error(
          fmt::format("{}.tool_call_parser{}: unknown parser \"{}\" (allowed: hermes "
                      "(<tool_call>{{...}}</tool_call>, Hermes and Qwen models), llama3_json "
                      "(Llama 3.1 and later: the answer is {{\"name\": ..., \"parameters\": "
                      "...}}), pythonic (Llama 3.2 and 4: the answer is [f(x=1), g()]), mistral "
                      "(Mistral models: [TOOL_CALLS] then the calls))",
                      where, line_of(*node), server.tool_call_parser));
    }
  }
  server.reasoning_parser = get_string(table, "reasoning_parser", where, "");
  if (const toml::node* node = table.get("reasoning_parser")) {
    if (server.reasoning_parser != "deepseek_r1" && server.reasoning_parser != "qwen3") {
      throw Error(
          fmt::format("{}.reasoning_parser{}: unknown parser \"{}\" (allowed: deepseek_r1 "
                      "(thinking up to </think>), qwen3 (thinking between <think> and </think>))",
                      where, line_of(*node), server.reasoning_parser));
    }
  }
  server.responses_store_mb =
      get_uint(table, "responses_store_mb", where, server.responses_store_mb, 0, 1u << 20);
  // http_port among them: it was ignored there without a word (an operator looked for /metrics).
  for (const char* key : {"http_port", "tool_call_parser", "reasoning_parser", "responses_store_mb",
                          "cors_allowed_origins", "cors_allow_credentials"}) {
    const toml::node* node = table.get(key);
    if (node != nullptr && server.role == "engine") {
      throw Error(fmt::format(
          "{}.{}{}: an engine process (role = \"engine\") has no HTTP frontend; set it in the "
          "router's file",
          where, key, line_of(*node)));
    }
  }
  // Browser clients of the HTTP frontend (docs/serving_http.md, "Browser clients").
  if (const toml::node* node = table.get("cors_allowed_origins")) {
    const toml::array* list = node->as_array();
    if (list == nullptr) {
      throw Error(
          fmt::format("{}.cors_allowed_origins{}: expected an array of origins, e.g. "
                      "[\"https://chat.example.com\"] (or [\"*\"] for every origin)",
                      where, line_of(*node)));
    }
    for (size_t i = 0; i < list->size(); ++i) {
      const toml::node& entry = *list->get(i);
      if (!entry.is_string()) {
        throw Error(fmt::format("{}.cors_allowed_origins[{}]{}: expected a string", where, i,
                                line_of(entry)));
      }
      const std::string& origin = entry.as_string()->get();
      const std::string why = why_not_web_origin(origin);
      if (!why.empty()) {
        throw Error(
            fmt::format("{}.cors_allowed_origins[{}]{}: {}", where, i, line_of(entry), why));
      }
      server.cors_allowed_origins.push_back(origin);
    }
  }
  server.cors_allow_credentials = get_bool(table, "cors_allow_credentials", where, false);
  if (server.cors_allow_credentials) {
    const std::string why = why_no_credentials_with(server.cors_allowed_origins);
    if (!why.empty()) {
      throw Error(fmt::format("{}.cors_allow_credentials{}: {}", where,
                              line_of(*table.get("cors_allow_credentials")), why));
    }
  }
  return server;
}

int32_t parse_role(const std::string& role, const std::string& where) {
  if (role == "mixed") return HW_ENGINE_ROLE_MIXED;
  if (role == "prefill") return HW_ENGINE_ROLE_PREFILL;
  if (role == "decode") return HW_ENGINE_ROLE_DECODE;
  throw Error(
      fmt::format("{}.role: unknown role \"{}\" (allowed: mixed, prefill, decode)", where, role));
}

EngineConfig::MovedKvBlocks parse_moved_kv_blocks(const std::string& value,
                                                  const std::string& where) {
  if (value == "all") return EngineConfig::MovedKvBlocks::kAll;
  if (value == "as_needed") return EngineConfig::MovedKvBlocks::kAsNeeded;
  throw Error(fmt::format("{}.moved_kv_blocks: unknown value \"{}\" (allowed: all, as_needed)",
                          where, value));
}

// host:port with a port of 1-65535, "[v6]:port", or a gRPC target ("dns:///host:port",
// "ipv4:", "ipv6:", whose port is checked too; "unix:" and "unix-abstract:" paths, which have
// none): without a port gRPC dials port 0 (or 443), and the router would find out only when its
// connect timeout ran out.
void check_engine_address(const std::string& address, const std::string& where) {
  if (address.starts_with("unix:") || address.starts_with("unix-abstract:")) return;
  const size_t colon = address.rfind(':');
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  // "::1:50061" or "::1": gRPC reads an unbracketed IPv6 address as a host without a port.
  const std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  const bool scheme = address.find("://") != std::string::npos || address.starts_with("dns:") ||
                      address.starts_with("ipv4:") || address.starts_with("ipv6:");
  if (!scheme && !host.starts_with('[') && host.find(':') != std::string::npos) {
    throw Error(
        fmt::format("{}.address: \"{}\" is an IPv6 address without brackets: write "
                    "\"[host]:port\" (e.g. \"[::1]:50061\")",
                    where, address));
  }
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  const unsigned long number = digits ? std::stoul(port) : 0;  // at most 5 digits: no throw
  if (colon == std::string::npos || colon == 0 || number == 0 || number > 65535) {
    throw Error(
        fmt::format("{}.address: \"{}\" is not host:port with a port of 1-65535 (e.g. "
                    "\"127.0.0.1:50061\", \"[::1]:50061\")",
                    where, address));
  }
}

// An [[engines]] group's `model_options` (none: nullopt): `model`'s plugin with the [model] table's
// options and these laid over them, checked against the plugin's schema.
std::optional<PluginChoice> read_model_options(const toml::table& engine_table,
                                               const toml::table& model_table,
                                               const PluginChoice& model, const std::string& name,
                                               const std::string& where) {
  const toml::table* overrides = get_table(engine_table, "model_options", where);
  if (overrides == nullptr) return std::nullopt;
  // Keys that choose the weights: the same architecture with other weights would pass the
  // cluster's check and be served under [model]'s tokenizer and name.
  for (const char* key : {"path", "random_weights", "seed"}) {
    if (const toml::node* node = overrides->get(key)) {
      throw Error(
          fmt::format("{}.model_options.{}{}: every engine runs [model]'s weights; a "
                      "deployment serves one model",
                      where, key, line_of(*node)));
    }
  }
  // Checked alone first, where the nodes still carry their lines (copies do not), then laid over
  // the [model]'s options and checked again as the whole the engine gets.
  PluginOptions::from_toml(*model.plugin->descriptor, overrides, where + ".model_options");
  toml::table merged;
  if (const toml::table* base = get_table(model_table, "options", name + ": model")) merged = *base;
  for (const auto& [key, value] : *overrides) merged.insert_or_assign(key, value);
  PluginChoice own = model;
  own.where = where + ".model_options";
  own.options = std::make_shared<const PluginOptions>(
      PluginOptions::from_toml(*own.plugin->descriptor, &merged, own.where));
  return own;
}

// An [[engines]] table with `address` names an engine process a router process fronts: that
// process's own file chooses its scheduler and sizes, so those keys here would be silently unused.
void check_remote_engine(const toml::table& t, const EngineConfig& engine, uint32_t count,
                         const std::string& where) {
  if (engine.address.empty()) throw Error(where + ".address: must not be empty (host:port)");
  check_engine_address(engine.address, where);
  if (count != 1) {
    throw Error(
        fmt::format("{}.count: {} engines at one address; write one [[engines]] table per "
                    "engine process",
                    where, count));
  }
  for (const char* key : {"block_size", "kv_blocks", "max_model_len", "max_waiting",
                          "prefix_caching", "moved_kv_blocks", "scheduler", "model_options"}) {
    if (t.get(key) != nullptr) {
      throw Error(
          fmt::format("{}.{}: not allowed beside address: the engine process at {} sets it "
                      "in its own deployment file",
                      where, key, engine.address));
    }
  }
}

// KV moves block by block from prefill engines to decode engines, so they must agree on the size
// of a block (the cluster would count the blocks of one size in blocks of the other).
void check_moved_block_sizes(const DeploymentConfig& config, const std::string& name) {
  const auto role = [](const EngineConfig& e) {
    return e.role == HW_ENGINE_ROLE_PREFILL ? "prefill" : "decode";
  };
  const EngineConfig* first = nullptr;  // every prefill and decode engine is held to its size
  for (const EngineConfig& e : config.engines) {
    if (e.role == HW_ENGINE_ROLE_MIXED || !e.address.empty()) continue;
    if (first == nullptr) {
      first = &e;
    } else if (e.block_size != first->block_size) {
      throw Error(fmt::format(
          "{}: {} ({}) has block_size {} and {} ({}) {}: KV moves between them block by block, "
          "so engines of both roles need one block_size",
          name, first->name, role(*first), first->block_size, e.name, role(e), e.block_size));
    }
  }
}

// The first engine of `role` in the deployment, or null.
const EngineConfig* engine_of_role(const DeploymentConfig& config, int32_t role) {
  const auto it = std::find_if(config.engines.begin(), config.engines.end(),
                               [&](const EngineConfig& e) { return e.role == role; });
  return it == config.engines.end() ? nullptr : &*it;
}

// Where the engines live must match what the process is: a router process fronts engine
// processes (every engine has an address); every other role runs its engines itself.
void check_process_shape(const DeploymentConfig& config) {
  const std::string name = config.file.string();
  const bool router = config.server.role == "router";
  for (size_t i = 0; i < config.engines.size(); ++i) {
    const EngineConfig& engine = config.engines[i];
    for (size_t j = 0; j < i && router; ++j) {
      if (config.engines[j].address == engine.address) {
        // Its load would be counted twice and its requests routed as if to two processes.
        throw Error(
            fmt::format("{}: {} and {} have the same address {}: each [[engines]] table "
                        "names one engine process",
                        name, config.engines[j].name, engine.name, engine.address));
      }
    }
    if (router && engine.address.empty()) {
      throw Error(
          fmt::format("{}: {}: a router process ([server] role = \"router\") needs the "
                      "address (host:port) of every engine process it fronts",
                      name, engine.name));
    }
    if (!router && !engine.address.empty()) {
      throw Error(
          fmt::format("{}: {}: address is for router processes only (set [server] role = "
                      "\"router\"); this process runs its engines itself",
                      name, engine.name));
    }
  }
  if (router && config.kv_transport) {
    throw Error(name +
                ": kv_transport: not used by a router process: engine processes hand KV "
                "over through shared memory on one host and over gRPC between hosts "
                "(docs/serving.md); remove the table");
  }
  // A prefill engine hands each request on to a decode engine of the deployment. So too in an
  // engine process, which may pair its own engines: its place in a disaggregated deployment is
  // the role the router process's file gives it, not its engines' roles.
  const EngineConfig* prefill = engine_of_role(config, HW_ENGINE_ROLE_PREFILL);
  if (prefill != nullptr && engine_of_role(config, HW_ENGINE_ROLE_DECODE) == nullptr) {
    throw Error(fmt::format(
        "{}: {}: role = \"prefill\" hands each request's KV to a decode engine, and the "
        "deployment has none; add an [[engines]] table with role = \"decode\", or make the "
        "engine \"mixed\"{}",
        name, prefill->name,
        config.server.role == "engine"
            ? " (an engine process that prefills for another: leave role out here and set "
              "role = \"prefill\" on its [[engines]] table in the router process's file)"
            : ""));
  }
  // Engines of one process (simulate, profile, serve with role "all", an engine process pairing
  // engines of its own) move a prefill engine's KV to a decode engine through the deployment's
  // transport: without one, every request would be refused at run time (helper-184: an engine
  // process's pair loaded and refused all). Between engine processes, KV is staged in shared
  // memory instead, which host KV does without a transport (docs/serving.md).
  if (config.server.role != "router" && !config.kv_transport) {
    for (const EngineConfig& engine : config.engines) {
      if (engine.role != HW_ENGINE_ROLE_PREFILL) continue;
      throw Error(fmt::format(
          "{}: {}: role = \"prefill\" hands each request's KV to a decode engine, which needs "
          "a [kv_transport] table (e.g. plugin = \"host_copy\"); add one, or make the engine "
          "\"mixed\"",
          name, engine.name));
    }
  }
}

}  // namespace

DeploymentConfig parse_deployment(std::string_view text, const fs::path& file,
                                  PluginRegistry& registry) {
  const std::string name = file.string();
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}: line {}, column {}: {}", name, e.source().begin.line,
                            e.source().begin.column, e.description()));
  }
  const fs::path base_dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  // A workload given where a deployment was expected fails on its first key: say what it is.
  if (!root.contains("model") && !root.contains("engines") &&
      (root.contains("classes") || root.contains("arrival") || root.contains("trace"))) {
    throw Error(
        fmt::format("{}: this is a workload file (it has '{}'), not a deployment: give it "
                    "with --workload, and the deployment with --config",
                    name,
                    root.contains("classes")   ? "classes"
                    : root.contains("arrival") ? "arrival"
                                               : "trace"));
  }
  check_keys(root, {"name", "plugin_dirs", "model", "engines", "router", "kv_transport", "server"},
             name);

  DeploymentConfig config;
  config.file = file;
  config.name = get_string(root, "name", name, file.stem().string());

  if (const toml::node* dirs = root.get("plugin_dirs")) {
    if (!dirs->is_array()) throw Error(name + ": plugin_dirs: expected an array of strings");
    // Added in reverse so that the first listed directory is searched first.
    const toml::array& list = *dirs->as_array();
    for (size_t i = list.size(); i-- > 0;) {
      if (!list[i].is_string()) {
        throw Error(fmt::format("{}: plugin_dirs[{}]: expected a string", name, i));
      }
      fs::path dir(list[i].as_string()->get());
      if (dir.is_relative()) dir = base_dir / dir;
      // A typo here would otherwise surface later as an unknown plugin, far from its cause.
      std::error_code ec;
      if (!fs::is_directory(dir, ec)) {
        throw Error(
            fmt::format("{}: plugin_dirs[{}]: {} is not a directory", name, i, dir.string()));
      }
      registry.add_search_directory(dir);
    }
  }

  const toml::table* model = get_table(root, "model", name);
  if (model == nullptr) throw Error(name + ": missing table [model]");
  config.model =
      read_choice(*model, HW_KIND_MODEL, name + ": model", registry, base_dir, std::nullopt, true);
  if (model->contains("tokenizer")) {
    const fs::path tokenizer(get_string(*model, "tokenizer", name + ": model", std::nullopt));
    if (tokenizer.empty()) {
      throw Error(name +
                  ": model.tokenizer: empty (name a directory holding tokenizer.json, or "
                  "leave the key out to read the model's `path`)");
    }
    config.tokenizer =
        (tokenizer.is_relative() ? base_dir / tokenizer : tokenizer).lexically_normal();
  }

  const toml::node* engines = root.get("engines");
  if (engines != nullptr && engines->is_table()) {
    throw Error(name + ": [engines] is a single table; engines are an array of tables: write " +
                "[[engines]] (double brackets), one per engine");
  }
  if (engines == nullptr || !engines->is_array_of_tables() || engines->as_array()->empty()) {
    throw Error(name + ": missing [[engines]]: at least one engine table is required");
  }
  uint32_t index = 0;
  const toml::array& groups = *engines->as_array();
  for (size_t g = 0; g < groups.size(); ++g) {
    const toml::table& t = *groups[g].as_table();
    const std::string where = fmt::format("{}: engines[{}]", name, g);
    check_keys(t,
               {"count", "pool", "role", "block_size", "kv_blocks", "max_model_len", "max_waiting",
                "prefix_caching", "moved_kv_blocks", "scheduler", "model_options", "address"},
               where);
    uint32_t count = get_uint(t, "count", where, 1, 1, 4096);
    EngineConfig engine;
    engine.pool = get_string(t, "pool", where, "");
    engine.role = parse_role(get_string(t, "role", where, "mixed"), where);
    engine.block_size = get_uint(t, "block_size", where, 16, 1, 1024);
    engine.kv_blocks = get_uint(t, "kv_blocks", where, 0, 0, UINT32_MAX);
    engine.max_model_len = get_uint(t, "max_model_len", where, 0, 0, UINT32_MAX);
    engine.max_waiting = get_uint(t, "max_waiting", where, 0, 0, UINT32_MAX);
    engine.prefix_caching = get_bool(t, "prefix_caching", where, engine.prefix_caching);
    engine.moved_kv_blocks =
        parse_moved_kv_blocks(get_string(t, "moved_kv_blocks", where, "all"), where);
    if (engine.role == HW_ENGINE_ROLE_PREFILL && t.get("moved_kv_blocks") != nullptr) {
      // It would be silently unused: only decode and mixed engines take requests whose KV moves.
      throw Error(where +
                  ".moved_kv_blocks: a prefill engine receives no moved KV; set it on the decode "
                  "engines");
    }
    engine.address = get_string(t, "address", where, "");
    if (t.get("address") != nullptr) check_remote_engine(t, engine, count, where);
    engine.scheduler =
        read_inline_or_table(t, "scheduler", HW_KIND_STEP_SCHEDULER, where + ".scheduler", registry,
                             base_dir, std::string("chunked"));
    engine.model = read_model_options(t, *model, config.model, name, where);
    for (uint32_t c = 0; c < count; ++c) {
      EngineConfig copy = engine;
      copy.index = index;
      copy.name = fmt::format("engine{}", index);
      config.engines.push_back(std::move(copy));
      ++index;
    }
  }

  // Without a [router] table: the router that serves the engines' roles. Prefill engines need
  // disaggregated; mixed engines are served by single or least_loaded (decode engines beside them
  // take no requests then); decode engines alone get disaggregated, which serves them only with
  // local_prefill_max_tokens, and says so.
  std::string default_router = "disaggregated";
  if (engine_of_role(config, HW_ENGINE_ROLE_PREFILL) == nullptr &&
      engine_of_role(config, HW_ENGINE_ROLE_MIXED) != nullptr) {
    default_router = config.engines.size() == 1 ? "single" : "least_loaded";
  }
  config.router = read_inline_or_table(root, "router", HW_KIND_ROUTER, name + ": router", registry,
                                       base_dir, default_router);
  if (root.get("kv_transport") != nullptr) {
    config.kv_transport = read_inline_or_table(root, "kv_transport", HW_KIND_KV_TRANSPORT,
                                               name + ": kv_transport", registry, base_dir);
  }
  if (const toml::table* server = get_table(root, "server", name)) {
    config.server = read_server(*server, name + ": server");
  }
  check_process_shape(config);
  check_moved_block_sizes(config, name);
  return config;
}

DeploymentConfig load_deployment(const fs::path& file, PluginRegistry& registry) {
  std::error_code error;
  if (fs::is_directory(file, error)) {
    throw Error(file.string() + ": is a directory, not a deployment file", HW_INVALID_ARGUMENT);
  }
  // A FIFO blocked open() for ever and /dev/zero read until memory ran out (helper-150's fuzzer).
  if (exists_but_not_regular(file)) {
    throw Error(file.string() +
                    ": is not a regular file (a device, a pipe or a socket?), not a "
                    "deployment file",
                HW_INVALID_ARGUMENT);
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    const int open_errno = errno;  // before any other call can change it
    throw Error(file.string() + ": cannot open deployment file (" +
                    unreadable_reason(file, open_errno) + ")",
                HW_NOT_FOUND);
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_deployment(buffer.str(), file, registry);
}

}  // namespace headway::core
