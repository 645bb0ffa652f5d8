#include "end_tokens.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace headway::serving {
namespace {

// Adds the ids of `file`'s eos_token_id to `ids`; nothing when the file does not exist.
void add_eos_ids(const std::filesystem::path& file, uint32_t vocab, std::vector<int32_t>& ids) {
  std::error_code ignored;
  if (!std::filesystem::is_regular_file(file, ignored)) return;
  const nlohmann::json j = core::read_json_file(file);
  if (!j.is_object()) return;
  const auto field = j.find("eos_token_id");
  if (field == j.end() || field->is_null()) return;
  const auto refuse = [&](const std::string& why) {
    throw core::Error(fmt::format("{}: field 'eos_token_id' {}", file.string(), why));
  };
  const auto add = [&](const nlohmann::json& id) {
    if (!id.is_number_integer()) refuse("must be a token id or a list of token ids");
    // A value past int64 (an unsigned one) reads as negative here: refused, and named as written.
    const int64_t value = id.get<int64_t>();
    if (value < 0 || value >= static_cast<int64_t>(vocab)) {
      refuse(fmt::format("names token {}, outside the vocabulary of {}", id.dump(), vocab));
    }
    ids.push_back(static_cast<int32_t>(value));
  };
  if (field->is_array()) {
    for (const nlohmann::json& id : *field) add(id);
  } else {
    add(*field);
  }
}

}  // namespace

std::vector<int32_t> checkpoint_end_tokens(const std::filesystem::path& dir, int32_t tokenizer_eos,
                                           uint32_t vocab) {
  std::vector<int32_t> ids;
  if (tokenizer_eos >= 0) ids.push_back(tokenizer_eos);
  if (!dir.empty()) {
    add_eos_ids(dir / "generation_config.json", vocab, ids);
    add_eos_ids(dir / "config.json", vocab, ids);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace headway::serving
