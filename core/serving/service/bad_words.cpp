#include "bad_words.h"

#include <fmt/format.h>
#include <headway/serving/service_error.h>

#include <algorithm>
#include <string_view>

namespace headway::serving {

std::vector<std::vector<int32_t>> bad_words_token_ids(const core::Tokenizer& tokenizer,
                                                      std::span<const std::string> words) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string_view word = words[i];
    // ASCII whitespace, as Python's str.lstrip() drops it (it also drops Unicode spaces, which a
    // word here keeps: an edge no client is known to rely on).
    word.remove_prefix(std::min(word.find_first_not_of(" \t\n\r\f\v"), word.size()));
    std::vector<int32_t> plain = tokenizer.encode(word);
    if (plain.empty()) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("bad_words[{}] encodes to no token: a word to ban needs at "
                                     "least one character besides leading whitespace",
                                     i),
                         "bad_words");
    }
    std::vector<int32_t> spaced = tokenizer.encode(" " + std::string(word));
    const bool keep_spaced = spaced.size() == plain.size() && spaced.front() != plain.front();
    out.push_back(std::move(plain));
    if (keep_spaced) out.push_back(std::move(spaced));
  }
  return out;
}

}  // namespace headway::serving
