#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/step_trace_reader.h>

#include <algorithm>
#include <fstream>
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
  return m;
}

// The fields a cost file takes from the model, side by side: engines that differ in any of them
// cannot share one sim model.
bool same_model(const TracedModel& a, const TracedModel& b) {
  const hw_model_info &x = a.info, &y = b.info;
  return a.plugin == b.plugin && a.block_size == b.block_size && x.layers == y.layers &&
         x.hidden == y.hidden && x.heads == y.heads && x.kv_heads == y.kv_heads &&
         x.head_dim == y.head_dim && x.vocab == y.vocab && x.max_model_len == y.max_model_len &&
         x.kv_capacity_tokens == y.kv_capacity_tokens &&
         x.kv_bytes_per_token == y.kv_bytes_per_token;
}

std::string describe(const TracedModel& m) {
  return fmt::format(
      "{} ({} layers, hidden {}, {}/{} heads of {}, vocab {}, max_model_len {}, {} KV tokens of {} "
      "bytes, blocks of {})",
      m.plugin, m.info.layers, m.info.hidden, m.info.heads, m.info.kv_heads, m.info.head_dim,
      m.info.vocab, m.info.max_model_len, m.info.kv_capacity_tokens, m.info.kv_bytes_per_token,
      m.block_size);
}

// Into `out` (cleared first; reused across lines, so that a long trace costs no allocation per
// step).
void read_slices(const nlohmann::json& slices, const Where& where, std::vector<ProfileSlice>& out) {
  if (!slices.is_array()) throw Error(fmt::format("{}: 'slices' must be an array", where.at()));
  out.clear();
  for (const nlohmann::json& s : slices) {
    if (!s.is_object()) throw Error(fmt::format("{}: a slice must be an object", where.at()));
    const nlohmann::json& sample = member(s, "sample", where);
    if (!sample.is_boolean())
      throw Error(fmt::format("{}: 'sample' must be true or false", where.at()));
    out.push_back(ProfileSlice{u32_member(s, "start", where), u32_member(s, "tokens", where),
                               sample.get<bool>()});
  }
}

}  // namespace

TracedSteps read_step_trace(const std::filesystem::path& file, std::optional<uint32_t> engine) {
  std::ifstream in(file);
  if (!in) throw Error(file.string() + ": cannot open the step trace");
  TracedSteps result;
  std::map<uint32_t, TracedModel> models;   // by engine, from the model lines
  std::map<uint32_t, uint64_t> steps_seen;  // by engine
  std::string line;
  std::vector<ProfileSlice> slices;
  for (Where where{file, 1}; std::getline(in, line); ++where.line) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      throw Error(fmt::format("{}: not a JSON object (is this a step trace?)", where.at()));
    }
    const uint32_t index = u32_member(j, "engine", where);
    if (engine && index != *engine) continue;
    if (j.contains("model")) {
      TracedModel model = read_model(j["model"], where);
      const auto [it, added] = models.emplace(index, model);
      if (!added && !same_model(it->second, model)) {
        throw Error(fmt::format("{}: engine {} describes its model again, differently: {} after {}",
                                where.at(), index, describe(model), describe(it->second)));
      }
      continue;
    }
    const auto model = models.find(index);
    if (model == models.end()) {
      throw Error(
          fmt::format("{}: a step of engine {} before its model line (the trace was written "
                      "by an older Headway, or is not whole); record it again",
                      where.at(), index));
    }
    const uint64_t step = unsigned_member(j, "step", where);
    const nlohmann::json& duration = member(j, "duration", where);
    if (!duration.is_number() || !(duration.get<double>() > 0)) {
      throw Error(fmt::format("{}: 'duration' must be a number of seconds above 0", where.at()));
    }
    read_slices(member(j, "slices", where), where, slices);
    if (steps_seen[index]++ == 0) {
      ++result.warmup_steps;
      continue;
    }
    if (slices.empty()) {
      ++result.empty_steps;
      continue;
    }
    ProfileMeasurement& m = result.steps.emplace_back();
    m.shape.label = fmt::format("engine {} step {}", index, step);
    m.features = StepFeatures::of(slices);  // the slices themselves are not kept: a long trace
                                            // has millions
    m.median_s = duration.get<double>();
  }
  if (in.bad()) throw Error(file.string() + ": reading the step trace failed");

  if (engine && models.find(*engine) == models.end()) {
    throw Error(fmt::format("{}: the trace has no engine {}", file.string(), *engine));
  }
  if (models.empty()) throw Error(file.string() + ": the step trace names no engine");
  for (const auto& [index, model] : models) {
    const TracedModel& first = models.begin()->second;
    if (!same_model(first, model)) {
      throw Error(fmt::format(
          "{}: engines {} and {} ran different models or limits ({} and {}); "
          "fit one engine's steps with --engine",
          file.string(), models.begin()->first, index, describe(first), describe(model)));
    }
    result.engines.push_back(index);
  }
  result.model = models.begin()->second;
  if (result.steps.empty()) {
    throw Error(
        fmt::format("{}: no step to fit (each engine's first step is left out as "
                    "warm-up: {} in all; steps without slices: {})",
                    file.string(), result.warmup_steps, result.empty_steps));
  }
  return result;
}

}  // namespace headway::core
