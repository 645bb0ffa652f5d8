#include "vocabulary_index.h"

#include <algorithm>
#include <array>
#include <utility>

#include "utf8_rules.h"

namespace headway::serving::guided {

VocabularyIndex::VocabularyIndex(const core::Tokenizer& tokenizer) {
  const uint32_t count = tokenizer.vocab_size();
  // SentencePiece drops the space that begins a text's first piece; decoded after a neighbour,
  // a token shows the bytes it really adds.
  const std::optional<core::DecodeAnchor> anchor = core::decode_anchor(tokenizer);
  offsets_.reserve(count + 1);
  offsets_.push_back(0);
  for (uint32_t id = 0; id < count; ++id) {
    bytes_ += core::token_bytes(tokenizer, anchor, static_cast<int32_t>(id));
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  index(tokenizer.eos());
}

VocabularyIndex::VocabularyIndex(const std::vector<std::string>& token_bytes, int32_t eos) {
  offsets_.push_back(0);
  for (const std::string& text : token_bytes) {
    bytes_ += text;
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  index(eos);
}

std::string_view VocabularyIndex::bytes_of(int32_t id) const {
  if (id < 0 || static_cast<uint32_t>(id) >= vocab_size()) return {};
  return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
}

namespace {

// Whole UTF-8 characters, none a control character, '"' or '\\' (the matcher's string rules).
bool is_plain_text(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const auto lead = static_cast<uint8_t>(bytes[i]);
    if (lead >= 0x20 && lead < 0x80) {
      if (lead == '"' || lead == '\\') return false;
      ++i;
      continue;
    }
    const size_t due = utf8_continuations(lead);
    // Not a lead byte, or a character the next token would end.
    if (due == 0 || i + due >= bytes.size()) return false;
    const ByteRange second = utf8_second_byte(lead);
    for (size_t k = 1; k <= due; ++k) {
      const auto continuation = static_cast<uint8_t>(bytes[i + k]);
      const ByteRange range = k == 1 ? second : ByteRange{0x80, 0xBF};
      if (continuation < range.low || continuation > range.high) return false;
    }
    i += due + 1;
  }
  return !bytes.empty();
}

// Whether `bytes` hold `marker` or begin with a proper suffix of it (what completes a marker the
// output has begun).
bool may_complete(std::string_view bytes, std::string_view marker) {
  if (bytes.find(marker.back()) == std::string_view::npos) return false;  // the usual case
  if (bytes.find(marker) != std::string_view::npos) return true;
  for (size_t from = 1; from < marker.size(); ++from) {
    if (bytes.starts_with(marker.substr(from))) return true;
  }
  return false;
}

}  // namespace

bool opens_after_blanks(std::string_view bytes, std::string_view text) {
  while (!bytes.empty() && (bytes.front() == ' ' || bytes.front() == '\t' ||
                            bytes.front() == '\n' || bytes.front() == '\r')) {
    bytes.remove_prefix(1);
  }
  return bytes.starts_with(text);
}

VocabularyIndex::TokenList VocabularyIndex::tokens_opening(std::string_view opener) const {
  return token_list(ListKind::kOpening, opener);
}

VocabularyIndex::TokenList VocabularyIndex::tokens_completing(std::string_view marker) const {
  return token_list(ListKind::kCompleting, marker);
}

VocabularyIndex::TokenList VocabularyIndex::token_list(ListKind kind, std::string_view text) const {
  {
    std::lock_guard lock(lists_mutex_);
    if (TokenList kept = kept_list(kind, text)) return kept;
  }
  // Scanned outside the lock: a first request does not hold up the others. Two that race on a
  // new list scan twice, and the first one in is kept.
  auto tokens = std::make_shared<std::vector<int32_t>>();
  if (!text.empty()) {
    for (uint32_t id = 0; id < vocab_size(); ++id) {
      const std::string_view bytes = bytes_of(static_cast<int32_t>(id));
      if (kind == ListKind::kOpening ? opens_after_blanks(bytes, text)
                                     : may_complete(bytes, text)) {
        tokens->push_back(static_cast<int32_t>(id));
      }
    }
  }
  std::lock_guard lock(lists_mutex_);
  ++list_scans_;
  if (TokenList kept = kept_list(kind, text)) return kept;
  if (lists_.size() >= kTokenListsKept) lists_.erase(lists_.begin());
  lists_.push_back({kind, std::string(text), std::move(tokens)});
  return lists_.back().tokens;
}

VocabularyIndex::TokenList VocabularyIndex::kept_list(ListKind kind, std::string_view text) const {
  for (auto it = lists_.begin(); it != lists_.end(); ++it) {
    if (it->kind != kind || it->text != text) continue;
    // Used now: moved to the back, so that texts a client made up (gRPC's starts_after and
    // reasoning_opener are free text) push out each other, not the served model's own tags.
    std::rotate(it, it + 1, lists_.end());
    return lists_.back().tokens;
  }
  return nullptr;
}

size_t VocabularyIndex::token_lists_kept() const {
  std::lock_guard lock(lists_mutex_);
  return lists_.size();
}

size_t VocabularyIndex::token_list_scans() const {
  std::lock_guard lock(lists_mutex_);
  return list_scans_;
}

VocabularyIndex::Walk VocabularyIndex::walk_of(std::vector<int32_t> ids) const {
  Walk walk;
  std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) {
    const std::string_view bx = bytes_of(x);
    const std::string_view by = bytes_of(y);
    return bx < by || (bx == by && x < y);
  });
  walk.shared_prefix.resize(ids.size(), 0);
  walk.first_byte_end.assign(256, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string_view current = bytes_of(ids[i]);
    walk.first_byte_end[static_cast<uint8_t>(current[0])] = static_cast<uint32_t>(i + 1);
    if (i == 0) continue;
    const std::string_view previous = bytes_of(ids[i - 1]);
    const auto [p, c] =
        std::mismatch(previous.begin(), previous.end(), current.begin(), current.end());
    walk.shared_prefix[i] = static_cast<uint32_t>(p - previous.begin());
  }
  walk.ids = std::move(ids);
  return walk;
}

void VocabularyIndex::index(int32_t eos) {
  eos_ = eos;
  std::vector<int32_t> all;
  std::vector<int32_t> not_plain;
  plain_text_.assign((vocab_size() + 63) / 64, 0);
  for (uint32_t id = 0; id < vocab_size(); ++id) {
    const auto token = static_cast<int32_t>(id);
    const std::string_view bytes = bytes_of(token);
    if (token == eos || bytes.empty()) continue;
    all.push_back(token);
    longest_ = std::max(longest_, bytes.size());
    if (is_plain_text(bytes)) {
      plain_text_[id / 64] |= uint64_t{1} << (id % 64);
    } else {
      not_plain.push_back(token);
    }
  }
  all_ = walk_of(std::move(all));
  not_plain_text_ = walk_of(std::move(not_plain));
}

}  // namespace headway::serving::guided
