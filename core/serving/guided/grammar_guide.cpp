#include "grammar_guide.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>

namespace headway::serving::guided {

GrammarGuide::GrammarGuide(std::shared_ptr<const Grammar> grammar,
                           std::shared_ptr<const VocabularyIndex> vocabulary,
                           std::vector<int32_t> stop_token_ids, size_t worth_keeping)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      stop_token_ids_(std::move(stop_token_ids)),
      worth_keeping_(worth_keeping),
      matcher_(*grammar_),
      walk_(vocabulary_->longest_token() + 1) {
  matcher_.start(state_);
}

bool GrammarGuide::is_end_token(int32_t token) const {
  return token == vocabulary_->eos() ||
         std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end();
}

bool GrammarGuide::complete() const { return ended_ || matcher_.complete(state_); }

bool GrammarGuide::accept(int32_t token) {
  if (ended_) return false;
  if (is_end_token(token)) {
    if (!matcher_.complete(state_)) return false;
    ended_ = true;
    return true;
  }
  const std::string_view bytes = vocabulary_->bytes_of(token);
  if (bytes.empty()) return false;
  const MatchState* from = &state_;
  int into = 0;
  for (const char byte : bytes) {
    if (!matcher_.advance(*from, static_cast<uint8_t>(byte), scratch_[into])) return false;
    from = &scratch_[into];
    into ^= 1;
  }
  std::swap(state_, scratch_[into ^ 1]);
  return true;
}

bool GrammarGuide::allows(int32_t token) {
  if (token < 0 || static_cast<uint32_t>(token) >= vocabulary_->vocab_size()) return false;
  const std::vector<uint64_t>& bits = allowed();
  return ((bits[static_cast<size_t>(token) / 64] >> (static_cast<size_t>(token) % 64)) & 1) != 0;
}

void GrammarGuide::mask(std::span<float> logits) {
  const std::vector<uint64_t>& bits = allowed();
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  const size_t known = std::min<size_t>(logits.size(), vocabulary_->vocab_size());
  bool any = false;
  // A word at a time: whole words allowed (inside strings) or refused (elsewhere) are the rule.
  for (size_t base = 0; base < known; base += 64) {
    const size_t count = std::min<size_t>(64, known - base);
    const uint64_t word = bits[base / 64];
    any = any || word != 0;
    if (word == ~uint64_t{0} && count == 64) continue;
    if (word == 0) {
      std::fill_n(logits.begin() + static_cast<std::ptrdiff_t>(base), count, kBanned);
      continue;
    }
    for (size_t k = 0; k < count; ++k) {
      if (((word >> k) & 1) == 0) logits[base + k] = kBanned;
    }
  }
  // Ids past the tokenizer's vocabulary (a model's padded rows) have no bytes.
  for (size_t id = known; id < logits.size(); ++id) logits[id] = kBanned;
  // No token continues the output (the vocabulary lacks the bytes it needs): it ends here rather
  // than with a token the grammar refuses.
  const int32_t eos = vocabulary_->eos();
  if (!any && eos >= 0 && static_cast<size_t>(eos) < logits.size()) logits[eos] = 0.0f;
}

const std::vector<uint64_t>& GrammarGuide::allowed() {
  key_.clear();
  key_.push_back(ended_ ? 1 : 0);
  state_.append_key(key_);
  if (const auto found = cache_.find(key_); found != cache_.end()) return masks_[found->second];
  unkept_.assign((vocabulary_->vocab_size() + 63) / 64, 0);
  if (compute_allowed(unkept_) < worth_keeping_) return unkept_;
  if (cache_.size() >= kCachedMasks) cache_.clear();  // slots are reused from the first on
  const auto slot = static_cast<uint32_t>(cache_.size());
  if (masks_.size() <= slot) masks_.emplace_back();
  masks_[slot].swap(unkept_);
  cache_.emplace(key_, slot);
  return masks_[slot];
}

size_t GrammarGuide::compute_allowed(std::vector<uint64_t>& bits) {
  const auto set = [&](int32_t id) {
    if (id >= 0 && static_cast<uint32_t>(id) < vocabulary_->vocab_size()) {
      bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (static_cast<size_t>(id) % 64);
    }
  };
  if (ended_) return 0;
  size_t cost = 0;
  // Inside a string every plain-text token fits: only the others are walked.
  if (matcher_.in_plain_string(state_)) {
    const std::vector<uint64_t>& plain = vocabulary_->plain_text();
    for (size_t w = 0; w < bits.size(); ++w) bits[w] |= plain[w];
    cost = walk_tokens(vocabulary_->not_plain_text(), bits);
  } else {
    cost = walk_tokens(vocabulary_->all(), bits);
  }
  // End tokens end the output: never in the middle of it, even when their text would fit.
  for (const int32_t stop : stop_token_ids_) {
    if (stop >= 0 && static_cast<uint32_t>(stop) < vocabulary_->vocab_size()) {
      bits[static_cast<size_t>(stop) / 64] &= ~(uint64_t{1} << (static_cast<size_t>(stop) % 64));
    }
  }
  if (matcher_.complete(state_)) {
    set(vocabulary_->eos());
    for (const int32_t stop : stop_token_ids_) set(stop);
  }
  return cost;
}

size_t GrammarGuide::walk_tokens(const VocabularyIndex::Walk& walk, std::vector<uint64_t>& bits) {
  // Tokens in byte order: each starts from the state after the bytes it shares with the one
  // before, and a prefix the grammar refuses rules out every token that starts with it (a refused
  // first byte: all of them at once).
  walk_[0] = state_;
  size_t advances = 0;
  size_t dead_at = SIZE_MAX;  // the previous token's prefix of this length was refused
  for (size_t i = 0; i < walk.ids.size();) {
    const int32_t token = walk.ids[i];
    const std::string_view bytes = vocabulary_->bytes_of(token);
    const size_t shared = walk.shared_prefix[i];
    if (shared >= dead_at) {
      ++i;
      continue;
    }
    dead_at = SIZE_MAX;
    bool alive = true;
    for (size_t d = shared; d < bytes.size(); ++d) {
      ++advances;
      if (!matcher_.advance(walk_[d], static_cast<uint8_t>(bytes[d]), walk_[d + 1])) {
        dead_at = d + 1;
        alive = false;
        break;
      }
    }
    if (alive) {
      bits[static_cast<size_t>(token) / 64] |= uint64_t{1} << (static_cast<size_t>(token) % 64);
    }
    if (dead_at == 1) {
      i = walk.first_byte_end[static_cast<uint8_t>(bytes[0])];
      dead_at = SIZE_MAX;  // the next token starts with another byte
    } else {
      ++i;
    }
  }
  return advances;
}

}  // namespace headway::serving::guided
