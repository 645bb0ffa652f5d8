// Compiled with TOML_HEADER_ONLY=1 (see CMakeLists.txt): the plugin carries its own copy of the
// toml++ parser instead of linking the host's libtomlplusplus, so it stays loadable by any host.
#include "fitted_cost.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace headway::models::sim {
namespace {

class Reader {
 public:
  Reader(const std::filesystem::path& file, const toml::table& root) : file_(file), root_(root) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw std::invalid_argument(file_.string() + ": " + key + " " + what);
  }

  const toml::table& table(const char* name) const {
    const toml::node* node = root_.get(name);
    if (node == nullptr) fail(std::string("[") + name + "]", "is missing");
    const toml::table* t = node->as_table();
    if (t == nullptr) fail(std::string("[") + name + "]", "must be a table");
    return *t;
  }

  // A number (integer or float) >= 0; seconds per unit.
  double coefficient(const toml::table& t, const char* table_name, const char* key) const {
    const std::string where = std::string(table_name) + "." + key;
    const toml::node* node = t.get(key);
    if (node == nullptr) fail(where, "is missing");
    double value = 0;
    if (const auto* f = node->as_floating_point()) {
      value = f->get();
    } else if (const auto* i = node->as_integer()) {
      value = static_cast<double>(i->get());
    } else {
      fail(where, "must be a number (seconds per unit)");
    }
    if (!std::isfinite(value) || value < 0) {
      fail(where, "must be a finite number >= 0 (got " + std::to_string(value) + ")");
    }
    return value;
  }

  // A key of `t` (the root when table_name is empty) that is none of `known`: a misspelt one
  // would otherwise be ignored and its default (or "is missing") taken instead.
  void only_known(const toml::table& t, const std::string& table_name,
                  std::initializer_list<std::string_view> known) const {
    for (const auto& [key, node] : t) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      std::string allowed;
      for (const std::string_view k : known)
        allowed += (allowed.empty() ? "" : ", ") + std::string(k);
      fail((table_name.empty() ? "" : table_name + ".") + std::string(key.str()) + " (line " +
               std::to_string(node.source().begin.line) + ")",
           "is not a key of a cost file" +
               std::string(table_name.empty() ? "" : "'s [" + table_name + "]") +
               " (known: " + allowed + ")");
    }
  }

  uint64_t positive(const toml::table& t, const char* table_name, const char* key,
                    uint64_t max) const {
    const std::string where = std::string(table_name) + "." + key;
    const toml::node* node = t.get(key);
    if (node == nullptr) fail(where, "is missing");
    const auto* i = node->as_integer();
    if (i == nullptr) fail(where, "must be an integer");
    if (i->get() <= 0 || static_cast<uint64_t>(i->get()) > max) {
      fail(where,
           "must be in [1, " + std::to_string(max) + "] (got " + std::to_string(i->get()) + ")");
    }
    return static_cast<uint64_t>(i->get());
  }

 private:
  const std::filesystem::path& file_;
  const toml::table& root_;
};

toml::table parse(const std::filesystem::path& file) {
  // A FIFO blocked open() for ever and /dev/zero read until memory ran out (helper-150's fuzzer).
  // (The plugin links nothing of the host's, so not core's exists_but_not_regular.)
  std::error_code ignored;
  if (std::filesystem::exists(file, ignored) && !std::filesystem::is_regular_file(file, ignored)) {
    throw std::invalid_argument(file.string() +
                                ": cannot open the cost file: not a regular file (a directory, "
                                "a device or a pipe?)");
  }
  std::ifstream in(file);
  if (!in) throw std::invalid_argument(file.string() + ": cannot open the cost file");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return toml::parse(text.str(), file.string());
  } catch (const toml::parse_error& e) {
    throw std::invalid_argument(file.string() + ":" + std::to_string(e.source().begin.line) + ": " +
                                std::string(e.description()));
  }
}

}  // namespace

FittedCost load_fitted_cost(const std::filesystem::path& file) {
  const toml::table root = parse(file);
  const Reader r(file, root);

  const toml::node* format = root.get("format");
  if (format == nullptr) r.fail("format", "is missing (expected format = 1)");
  if (format->value<int64_t>() != 1) r.fail("format", "must be 1 (this reader's version)");

  FittedCost cost;
  const toml::table& c = r.table("coefficients");
  r.only_known(c, "coefficients",
               {"overhead_s", "per_token_s", "per_sampled_token_s", "per_attention_pair_s",
                "per_kv_token_s"});
  cost.coefficients.overhead_s = r.coefficient(c, "coefficients", "overhead_s");
  cost.coefficients.per_token_s = r.coefficient(c, "coefficients", "per_token_s");
  cost.coefficients.per_sampled_token_s = r.coefficient(c, "coefficients", "per_sampled_token_s");
  cost.coefficients.per_attention_pair_s = r.coefficient(c, "coefficients", "per_attention_pair_s");
  cost.coefficients.per_kv_token_s = r.coefficient(c, "coefficients", "per_kv_token_s");

  const toml::table& m = r.table("model");
  r.only_known(m, "model",
               {"layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "max_model_len",
                "kv_capacity_tokens", "kv_bytes_per_token"});
  constexpr uint64_t kMaxShape = uint64_t{1} << 24;
  constexpr uint64_t kMaxLen = uint64_t{1} << 31;
  const auto shape = [&](const char* key, uint64_t max) {
    return static_cast<uint32_t>(r.positive(m, "model", key, max));
  };
  cost.model.layers = shape("layers", kMaxShape);
  cost.model.hidden = shape("hidden", kMaxShape);
  cost.model.heads = shape("heads", kMaxShape);
  cost.model.kv_heads = shape("kv_heads", kMaxShape);
  cost.model.head_dim = shape("head_dim", kMaxShape);
  cost.model.vocab = shape("vocab", kMaxShape);
  cost.model.max_model_len = shape("max_model_len", kMaxLen);
  cost.kv_capacity_tokens = r.positive(m, "model", "kv_capacity_tokens", uint64_t{1} << 50);
  cost.kv_bytes_per_token = r.positive(m, "model", "kv_bytes_per_token", uint64_t{1} << 40);
  if (cost.model.heads % cost.model.kv_heads != 0) {
    r.fail("model.kv_heads", "must divide model.heads (grouped-query attention)");
  }
  // As the roofline mode: an engine that cannot hold one full-length request would deadlock on it.
  if (cost.kv_capacity_tokens < cost.model.max_model_len) {
    r.fail("model.kv_capacity_tokens", "(" + std::to_string(cost.kv_capacity_tokens) +
                                           ") must be >= model.max_model_len (" +
                                           std::to_string(cost.model.max_model_len) + ")");
  }

  // What `headway profile` writes (core/src/step_profiler.cpp), and nothing else: checked after
  // the required keys, so that a misspelt table is named as the one missing.
  r.only_known(
      root, "",
      {"format", "date", "source", "model_plugin", "machine", "coefficients", "model", "fit"});
  if (const toml::table* fit = root["fit"].as_table()) {
    r.only_known(*fit, "fit",
                 {"method", "shapes", "quick", "median_relative_error", "max_relative_error"});
  }
  if (const toml::table* machine = root["machine"].as_table()) {
    r.only_known(*machine, "machine", {"cpu", "threads", "cores"});
    cost.machine = (*machine)["cpu"].value_or(std::string());
    if (const auto threads = (*machine)["threads"].value<int64_t>()) {
      cost.machine += ", " + std::to_string(*threads) + " threads";
    }
  }
  return cost;
}

}  // namespace headway::models::sim
