#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <headway/core/model_architecture.h>
#include <headway/core/step_trace_reader.h>

#include <algorithm>
#include <fstream>
#include <headway/sdk/json_depth.hpp>
#include <map>
#include <nlohmann/json.hpp>

namespace headway::core {
namespace {

// Where a line came from, for messages: "trace.jsonl:12".
struct Where {
  const std::filesystem::path& file;
  uint64_t line;
  std::string at() const { return fmt::format("{}:{}", file.string(), line); }
};

const nlohmann::json& member(const nlohmann::json& object, const char* key, const Where& where) {
  const auto it = object.find(key);
  if (it == object.end()) throw Error(fmt::format("{}: '{}' is missing", where.at(), key));
  return *it;
}

uint64_t unsigned_member(const nlohmann::json& object, const char* key, const Where& where) {
  const nlohmann::json& value = member(object, key, where);
  if (!value.is_number_unsigned()) {
    throw Error(fmt::format("{}: '{}' must be a non-negative integer", where.at(), key));
  }
  return value.get<uint64_t>();
}

uint32_t u32_member(const nlohmann::json& object, const char* key, const Where& where) {
  const uint64_t value = unsigned_member(object, key, where);
  if (value > UINT32_MAX) throw Error(fmt::format("{}: '{}' is out of range", where.at(), key));
  return static_cast<uint32_t>(value);
}

TracedModel read_model(const nlohmann::json& model, const Where& where) {
  if (!model.is_object()) throw Error(fmt::format("{}: 'model' must be an object", where.at()));
  TracedModel m;
  const nlohmann::json& plugin = member(model, "plugin", where);
  if (!plugin.is_string()) throw Error(fmt::format("{}: 'plugin' must be a string", where.at()));
  m.plugin = plugin.get<std::string>();
  hw_model_info& info = m.info;
  info.struct_size = sizeof(hw_model_info);
  info.layers = u32_member(model, "layers", where);
  info.hidden = u32_member(model, "hidden", where);
  info.heads = u32_member(model, "heads", where);
  info.kv_heads = u32_member(model, "kv_heads", where);
  info.head_dim = u32_member(model, "head_dim", where);
  info.vocab = u32_member(model, "vocab", where);
  info.max_model_len = u32_member(model, "max_model_len", where);
  info.kv_capacity_tokens = unsigned_member(model, "kv_capacity_tokens", where);
  info.kv_bytes_per_token = unsigned_member(model, "kv_bytes_per_token", where);
  m.block_size = u32_member(model, "block_size", where);
  // What a sim model built from these would refuse, refused here where the line can be named.
  for (const auto& [key, value] : {std::pair<const char*, uint64_t>{"layers", info.layers},
                                   {"hidden", info.hidden},
                                   {"heads", info.heads},
                                   {"kv_heads", info.kv_heads},
                                   {"head_dim", info.head_dim},
                                   {"vocab", info.vocab},
                                   {"max_model_len", info.max_model_len},
                                   {"kv_capacity_tokens", info.kv_capacity_tokens},
                                   {"kv_bytes_per_token", info.kv_bytes_per_token},
                                   {"block_size", m.block_size}}) {
    if (value == 0) throw Error(fmt::format("{}: model.{} must be at least 1", where.at(), key));
  }
  if (info.heads % info.kv_heads != 0) {
    throw Error(fmt::format("{}: model.kv_heads ({}) must divide model.heads ({})", where.at(),
                            info.kv_heads, info.heads));
  }
  // An engine whose KV holds fewer tokens than max_model_len cannot run a request that long: the
  // KV capacity is its real limit (and a sim model refuses a max_model_len above it).
  if (info.kv_capacity_tokens < info.max_model_len) {
    info.max_model_len = static_cast<uint32_t>(info.kv_capacity_tokens);
  }
  return m;
}

// What a sim model takes from a traced engine apart from its limits: engines that differ in any
// of these cannot share one cost file. Limits (max_model_len, KV capacity) may differ, e.g. KV
// sized from a GPU's free memory run to run; the fit takes the smallest.
bool same_shape(const TracedModel& a, const TracedModel& b) {
  return a.plugin == b.plugin && !architecture_difference(a.info, b.info) &&
         a.info.kv_bytes_per_token == b.info.kv_bytes_per_token;
}

std::string describe(const TracedModel& m) {
  return fmt::format(
      "{} ({} layers, hidden {}, {}/{} heads of {}, vocab {}, {} KV bytes per token)", m.plugin,
      m.info.layers, m.info.hidden, m.info.heads, m.info.kv_heads, m.info.head_dim, m.info.vocab,
      m.info.kv_bytes_per_token);
}

// Into `out` (cleared first; reused across lines, so that a long trace costs no allocation per
// step). Each slice computes at least one position, all of them below the engine's max_model_len.
void read_slices(const nlohmann::json& slices, const Where& where, uint32_t max_model_len,
                 std::vector<ProfileSlice>& out) {
  if (!slices.is_array()) throw Error(fmt::format("{}: 'slices' must be an array", where.at()));
  out.clear();
  for (const nlohmann::json& s : slices) {
    if (!s.is_object()) throw Error(fmt::format("{}: a slice must be an object", where.at()));
    const nlohmann::json& sample = member(s, "sample", where);
    if (!sample.is_boolean())
      throw Error(fmt::format("{}: 'sample' must be true or false", where.at()));
    const ProfileSlice slice{u32_member(s, "start", where), u32_member(s, "tokens", where),
                             sample.get<bool>()};
    if (slice.tokens == 0) throw Error(fmt::format("{}: a slice of 0 tokens", where.at()));
    if (uint64_t{slice.start} + slice.tokens > max_model_len) {
      throw Error(fmt::format("{}: a slice reaches position {}, past its engine's max_model_len {}",
                              where.at(), uint64_t{slice.start} + slice.tokens, max_model_len));
    }
    out.push_back(slice);
  }
}

}  // namespace

TracedSteps read_step_trace(const std::filesystem::path& file, std::optional<uint32_t> engine,
                            bool keep_slices) {
  // A FIFO blocked open() for ever and /dev/zero read until memory ran out (helper-150's fuzzer).
  if (exists_but_not_regular(file)) {
    throw Error(file.string() + ": cannot open the step trace (" + unreadable_reason(file) + ")");
  }
  std::ifstream in(file);
  if (!in) throw Error(file.string() + ": cannot open the step trace");
  TracedSteps result;
  // Per engine: its runs so far (a model line starts one: traces of several runs may be
  // concatenated) and the steps of its current run.
  struct EngineState {
    uint32_t runs = 0;
    uint64_t steps_in_run = 0;
    uint32_t max_model_len = 0;  // of its current run's model line
  };
  std::map<uint32_t, EngineState> engines;
  std::optional<std::pair<uint32_t, TracedModel>> first;  // the first model line kept
  std::string line;
  std::vector<ProfileSlice> slices;
  for (Where where{file, 1}; std::getline(in, line); ++where.line) {
    if (line.empty()) continue;
    // Before parsing: a value nested a million levels deep overflows the stack when read.
    if (const std::string problem = sdk::json_depth_problem(line); !problem.empty()) {
      throw Error(fmt::format("{}: {}", where.at(), problem));
    }
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      // A last line without its newline is what a killed process or a full disk leaves: the
      // steps before it are whole.
      if (in.eof()) {
        result.dropped_partial_last_line = true;
        break;
      }
      throw Error(fmt::format("{}: not a JSON object (is this a step trace?)", where.at()));
    }
    const uint32_t index = u32_member(j, "engine", where);
    if (engine && index != *engine) continue;
    if (j.contains("model")) {
      const TracedModel model = read_model(j["model"], where);
      if (!first) {
        first.emplace(index, model);
        result.model = model;
      } else if (!same_shape(first->second, model)) {
        throw Error(
            fmt::format("{}: engine {} ran another model than engine {}: {} and {}; fit "
                        "one engine's steps with --engine",
                        where.at(), index, first->first, describe(model), describe(first->second)));
      }
      TracedModel& kept = result.model;
      result.limits_differ = result.limits_differ ||
                             model.info.max_model_len != kept.info.max_model_len ||
                             model.info.kv_capacity_tokens != kept.info.kv_capacity_tokens;
      kept.info.max_model_len = std::min(kept.info.max_model_len, model.info.max_model_len);
      kept.info.kv_capacity_tokens =
          std::min(kept.info.kv_capacity_tokens, model.info.kv_capacity_tokens);
      EngineState& state = engines[index];
      ++state.runs;
      state.steps_in_run = 0;
      state.max_model_len = model.info.max_model_len;
      continue;
    }
    const auto state = engines.find(index);
    if (state == engines.end()) {
      throw Error(
          fmt::format("{}: a step of engine {} before its model line (the trace was written "
                      "by an older Headway, or is not whole); record it again",
                      where.at(), index));
    }
    const uint64_t step = unsigned_member(j, "step", where);
    read_slices(member(j, "slices", where), where, state->second.max_model_len, slices);
    // A step that only preempted ran no forward pass: on the virtual clock it took no time.
    if (slices.empty()) {
      ++result.empty_steps;
      continue;
    }
    const nlohmann::json& duration = member(j, "duration", where);
    if (!duration.is_number() || !(duration.get<double>() > 0)) {
      throw Error(fmt::format("{}: 'duration' must be a number of seconds above 0", where.at()));
    }
    if (state->second.steps_in_run++ == 0) {
      ++result.warmup_steps;
      continue;
    }
    ProfileMeasurement& m = result.steps.emplace_back();
    // Short enough to need no allocation: a long trace has millions of steps. The slices
    // themselves are kept only when asked for; their features always.
    m.shape.label = state->second.runs > 1
                        ? fmt::format("r{} e{} s{}", state->second.runs, index, step)
                        : fmt::format("e{} s{}", index, step);
    m.features = StepFeatures::of(slices);
    if (keep_slices) m.shape.slices = slices;
    m.median_s = duration.get<double>();
    TraceCoverage& c = result.coverage;
    c.max_batch = std::max<uint32_t>(c.max_batch, static_cast<uint32_t>(slices.size()));
    for (const ProfileSlice& s : slices) {
      c.max_context = std::max(c.max_context, s.start + s.tokens);  // below max_model_len
    }
    // A sum of uint32 slices, exact in a double: 64 bits hold it where 32 would not.
    c.max_step_tokens = std::max(c.max_step_tokens, static_cast<uint64_t>(m.features.tokens));
    c.steps_with_prefill += m.features.decode_only() ? 0 : 1;
  }
  if (in.bad()) throw Error(file.string() + ": reading the step trace failed");

  if (engine && engines.find(*engine) == engines.end()) {
    throw Error(fmt::format("{}: the trace has no engine {}", file.string(), *engine));
  }
  if (engines.empty()) throw Error(file.string() + ": the step trace names no engine");
  for (const auto& [index, state] : engines) {
    result.engines.push_back(index);
    result.runs = std::max(result.runs, state.runs);
  }
  if (result.steps.empty()) {
    throw Error(
        fmt::format("{}: no step to fit (each engine's first step is left out as "
                    "warm-up: {} in all; steps without slices: {})",
                    file.string(), result.warmup_steps, result.empty_steps));
  }
  return result;
}

}  // namespace headway::core
