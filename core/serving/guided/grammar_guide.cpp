#include "grammar_guide.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <limits>
#include <utility>

namespace headway::serving::guided {

namespace {

// Grammar places that never repeat cannot grow a store past this (vocab / 8 bytes each).
constexpr size_t kOwnStoreCapacity = 64;

bool bit(const std::vector<uint64_t>& bits, size_t id) {
  return ((bits[id / 64] >> (id % 64)) & 1);
}

}  // namespace

GrammarGuide::GrammarGuide(std::shared_ptr<const Grammar> grammar,
                           std::shared_ptr<const VocabularyIndex> vocabulary,
                           const std::vector<int32_t>& stop_token_ids,
                           std::shared_ptr<MaskStore> store, size_t worth_keeping,
                           std::string starts_after, std::string reasoning_opener)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      store_(store ? std::move(store) : std::make_shared<MaskStore>(kOwnStoreCapacity)),
      worth_keeping_(worth_keeping),
      matcher_(*grammar_),
      walk_(vocabulary_->longest_token() + 1),
      automaton_walk_(vocabulary_->longest_token() + 1) {
  if (vocabulary_->eos() >= 0) end_tokens_.push_back(vocabulary_->eos());
  for (const int32_t stop : stop_token_ids) {
    if (stop >= 0 && static_cast<uint32_t>(stop) < vocabulary_->vocab_size() &&
        std::find(end_tokens_.begin(), end_tokens_.end(), stop) == end_tokens_.end()) {
      end_tokens_.push_back(stop);
    }
  }
  end_logits_.resize(end_tokens_.size());
  marker_ = std::move(starts_after);
  if (!marker_.empty()) {
    // Asked for here, on the admitting thread: the step thread never scans nor locks for it.
    marker_ends_ = vocabulary_->tokens_completing(marker_);
  }
  if (!marker_.empty() && !reasoning_opener.empty()) {
    opener_ = std::move(reasoning_opener);
    const VocabularyIndex::TokenList opening = vocabulary_->tokens_opening(opener_);
    for (const int32_t token : *opening) {
      if (!is_end_token(token)) opener_tokens_.push_back(token);
    }
    opener_logits_.resize(opener_tokens_.size());
  }
  matcher_.start(state_);
}

bool GrammarGuide::opens_reasoning(int32_t token) const {
  return !is_end_token(token) && opens_after_blanks(vocabulary_->bytes_of(token), opener_);
}

std::optional<bool> GrammarGuide::completes_marker(std::string_view bytes) {
  marker_text_.assign(marker_tail_);
  marker_text_.append(bytes);
  const size_t at = marker_text_.find(marker_);
  if (at == std::string::npos) return std::nullopt;
  matcher_.start(marker_state_[0], kLeadingWhitespace);
  for (size_t i = at + marker_.size(); i < marker_text_.size(); ++i) {
    if (!matcher_.advance(marker_state_[0], static_cast<uint8_t>(marker_text_[i]),
                          marker_state_[1])) {
      return false;
    }
    std::swap(marker_state_[0], marker_state_[1]);
  }
  return true;
}

void GrammarGuide::mask_free(std::span<float> logits) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  for (const int32_t end : end_tokens_) {
    if (static_cast<size_t>(end) < logits.size()) logits[end] = kBanned;
  }
  for (size_t id = vocabulary_->vocab_size(); id < logits.size(); ++id) logits[id] = kBanned;
  for (const int32_t token : *marker_ends_) {
    const std::optional<bool> fits = completes_marker(vocabulary_->bytes_of(token));
    if (fits && !*fits && static_cast<size_t>(token) < logits.size()) logits[token] = kBanned;
  }
}

bool GrammarGuide::is_end_token(int32_t token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

bool GrammarGuide::complete() const {
  return ended_ || (marker_.empty() && matcher_.complete(state_));
}

bool GrammarGuide::accept(int32_t token) {
  if (ended_) return false;
  if (!opener_.empty()) {
    // The first token decides: the reasoning opens, or there is none and the answer starts here.
    // A refused token changes nothing (TokenGuide's contract).
    const bool opens = opens_reasoning(token);
    if (!(opens ? accept_thinking(token) : accept_shaped(token))) return false;
    opener_.clear();
    if (!opens) marker_.clear();
    return true;
  }
  return marker_.empty() ? accept_shaped(token) : accept_thinking(token);
}

bool GrammarGuide::accept_thinking(int32_t token) {
  if (is_end_token(token)) return false;
  const std::string_view bytes = vocabulary_->bytes_of(token);
  const std::optional<bool> fits = completes_marker(bytes);
  if (fits) {
    if (!*fits) return false;
    std::swap(state_, marker_state_[0]);
    marker_.clear();
    return true;
  }
  marker_tail_ += bytes;
  // Only the bytes that could still begin the marker are kept.
  if (marker_tail_.size() >= marker_.size()) {
    marker_tail_.erase(0, marker_tail_.size() - marker_.size() + 1);
  }
  return true;
}

bool GrammarGuide::accept_shaped(int32_t token) {
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
  if (ended_ || token < 0 || static_cast<uint32_t>(token) >= vocabulary_->vocab_size()) {
    return false;
  }
  // Thinking, or a first token that opens it: anything that does not close it wrongly.
  if (!marker_.empty() && (opener_.empty() || opens_reasoning(token))) {
    if (is_end_token(token)) return false;
    return completes_marker(vocabulary_->bytes_of(token)).value_or(true);
  }
  // End tokens end the output: only where it is complete, even when their text would fit.
  if (is_end_token(token)) return matcher_.complete(state_);
  return bit(fitting(), static_cast<size_t>(token));
}

void GrammarGuide::mask(std::span<float> logits) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  if (ended_) {
    std::fill(logits.begin(), logits.end(), kBanned);
    return;
  }
  if (!opener_.empty()) {
    mask_opening(logits);
    return;
  }
  if (!marker_.empty()) {
    mask_free(logits);
    return;
  }
  mask_grammar(logits);
}

void GrammarGuide::mask_opening(std::span<float> logits) {
  for (size_t t = 0; t < opener_tokens_.size(); ++t) {
    const auto id = static_cast<size_t>(opener_tokens_[t]);
    opener_logits_[t] = id < logits.size() ? logits[id] : 0.0f;
  }
  mask_grammar(logits, /*others_may_come=*/!opener_tokens_.empty());
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < opener_tokens_.size(); ++t) {
    const auto id = static_cast<size_t>(opener_tokens_[t]);
    if (id >= logits.size()) continue;
    // As in mask_free: one that would also close the thinking with bytes the shape refuses, not.
    const bool fits = completes_marker(vocabulary_->bytes_of(opener_tokens_[t])).value_or(true);
    logits[id] = fits ? opener_logits_[t] : kBanned;
  }
}

void GrammarGuide::mask_grammar(std::span<float> logits, bool others_may_come) {
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  for (size_t e = 0; e < end_tokens_.size(); ++e) {
    const auto id = static_cast<size_t>(end_tokens_[e]);
    end_logits_[e] = id < logits.size() ? logits[id] : kBanned;
  }
  const std::vector<uint64_t>& bits = fitting();
  const size_t known = std::min<size_t>(logits.size(), vocabulary_->vocab_size());
  size_t fits = 0;  // tokens left, end tokens included (taken off below), counted far enough
  // A word at a time: whole words allowed (inside strings) or refused (elsewhere) are the rule.
  for (size_t base = 0; base < known; base += 64) {
    const size_t count = std::min<size_t>(64, known - base);
    const uint64_t all = count == 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
    const uint64_t word = bits[base / 64] & all;
    // Counted only while it could still come to nothing once the end tokens are taken off.
    if (fits <= end_tokens_.size()) fits += static_cast<size_t>(std::popcount(word));
    if (word == all) continue;
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
  // End tokens: where the output is complete (with their own logits), else never, even when
  // their text fits (a stop id can be an ordinary token).
  const bool complete = matcher_.complete(state_);
  for (size_t e = 0; e < end_tokens_.size(); ++e) {
    const auto id = static_cast<size_t>(end_tokens_[e]);
    if (id < logits.size()) logits[id] = complete ? end_logits_[e] : kBanned;
    if (id < known && bit(bits, id) && fits > 0) --fits;
  }
  // No token continues the output (the vocabulary lacks the bytes it needs, or only stop ids
  // would): it ends here rather than with a token the grammar refuses.
  const int32_t eos = vocabulary_->eos();
  if (fits == 0 && !complete && !others_may_come && eos >= 0 &&
      static_cast<size_t>(eos) < logits.size()) {
    logits[eos] = 0.0f;
  }
}

const std::vector<uint64_t>& GrammarGuide::fitting() {
  key_.clear();
  state_.append_key(key_);
  held_ = store_->find(key_);
  if (held_) return *held_;
  walked_.assign((vocabulary_->vocab_size() + 63) / 64, 0);
  size_t cost = 0;
  uint32_t automaton_state = 0;
  int closing = GrammarMatcher::kNothingCloses;
  if (const ByteDfa* dfa = matcher_.automaton_at(state_, automaton_state, closing)) {
    if (closing == GrammarMatcher::kParentReads) {
      GrammarMatcher::parent_place(state_, parent_);
      // Tokens read whole by the place below, the text ending (at a match) before them.
      if (dfa->accepting(automaton_state)) cost += add_place_set(parent_, walked_);
    }
    cost += walk_automaton(*dfa, automaton_state, closing, vocabulary_->all(), walked_);
  } else if (matcher_.in_plain_string(state_)) {
    // Inside a string every plain-text token fits: only the others are walked.
    const std::vector<uint64_t>& plain = vocabulary_->plain_text();
    for (size_t w = 0; w < walked_.size(); ++w) walked_[w] |= plain[w];
    cost = walk_tokens(state_, vocabulary_->not_plain_text(), walked_);
  } else {
    cost = walk_tokens(state_, vocabulary_->all(), walked_);
  }
  if (cost < worth_keeping_) return walked_;
  held_ = std::make_shared<const std::vector<uint64_t>>(walked_);
  store_->keep(key_, held_);
  return *held_;
}

namespace {

// The ordered walk both kinds of place share. Tokens come in byte order, so each shares a prefix
// with the one before (walk.shared_prefix) and the caller's per-depth states for that prefix are
// still there; a prefix that was refused rules out every token that starts with it (a refused
// first byte: all of them at once, by first_byte_end). `token_fits(bytes, shared, refused_at)`
// checks one token from depth `shared` on; where a prefix of it is refused, it sets refused_at
// to that prefix's length.
template <typename TokenFits>
void walk_in_byte_order(const VocabularyIndex::Walk& walk, const VocabularyIndex& vocabulary,
                        std::vector<uint64_t>& bits, TokenFits&& token_fits) {
  size_t dead_at = SIZE_MAX;  // the previous token's prefix of this length was refused
  for (size_t i = 0; i < walk.ids.size();) {
    const int32_t token = walk.ids[i];
    const std::string_view bytes = vocabulary.bytes_of(token);
    const size_t shared = walk.shared_prefix[i];
    if (shared >= dead_at) {
      ++i;
      continue;
    }
    dead_at = SIZE_MAX;
    if (token_fits(bytes, shared, dead_at)) {
      bits[static_cast<size_t>(token) / 64] |= uint64_t{1} << (static_cast<size_t>(token) % 64);
    }
    if (dead_at == 1) {
      i = walk.first_byte_end[static_cast<uint8_t>(bytes[0])];
      dead_at = SIZE_MAX;  // the next token starts with another byte
    } else {
      ++i;
    }
  }
}

}  // namespace

size_t GrammarGuide::add_place_set(const MatchState& place, std::vector<uint64_t>& bits) {
  place_key_.clear();
  place.append_key(place_key_);
  MaskStore::Mask known = store_->find(place_key_);
  size_t cost = 0;
  if (!known) {
    parent_bits_.assign(bits.size(), 0);
    cost = walk_tokens(place, vocabulary_->all(), parent_bits_);
    if (cost >= worth_keeping_) {
      known = std::make_shared<const std::vector<uint64_t>>(parent_bits_);
      store_->keep(place_key_, known);
    }
  }
  const std::vector<uint64_t>& set = known ? *known : parent_bits_;
  for (size_t w = 0; w < bits.size(); ++w) bits[w] |= set[w];
  return cost;
}

size_t GrammarGuide::walk_tokens(const MatchState& from, const VocabularyIndex::Walk& walk,
                                 std::vector<uint64_t>& bits) {
  // walk_[d]: the matcher's state after d bytes of the current token.
  walk_[0] = from;
  size_t advances = 0;
  walk_in_byte_order(
      walk, *vocabulary_, bits, [&](std::string_view bytes, size_t shared, size_t& refused_at) {
        for (size_t d = shared; d < bytes.size(); ++d) {
          ++advances;
          if (!matcher_.advance(walk_[d], static_cast<uint8_t>(bytes[d]), walk_[d + 1])) {
            refused_at = d + 1;
            return false;
          }
        }
        return true;
      });
  return advances;
}

size_t GrammarGuide::walk_automaton(const ByteDfa& dfa, uint32_t start, int closing,
                                    const VocabularyIndex::Walk& walk,
                                    std::vector<uint64_t>& bits) {
  // automaton_walk_[d]: the automaton's state after d bytes of the current token, valid up to
  // `valid` (where it refused a byte, or the token's end).
  automaton_walk_[0] = start;
  rests_.clear();
  parent_takes_.fill(kUnknown);
  size_t steps = 0;
  size_t valid = 0;
  walk_in_byte_order(
      walk, *vocabulary_, bits, [&](std::string_view bytes, size_t shared, size_t& refused_at) {
        size_t d = std::min(shared, valid);
        for (; d < bytes.size(); ++d) {
          ++steps;
          const uint32_t next = dfa.next(automaton_walk_[d], static_cast<uint8_t>(bytes[d]));
          if (next == ByteDfa::kDead) break;
          automaton_walk_[d + 1] = next;
        }
        valid = d;
        if (d == bytes.size()) return true;
        if (closing == GrammarMatcher::kParentReads) {
          // The text may end at any match inside the token (before it: add_place_set's part),
          // the place below reading the rest. Only where it cannot may a refused prefix rule
          // out the tokens that share it.
          bool may_end = false;
          for (size_t p = 1; p <= d; ++p) {
            if (!dfa.accepting(automaton_walk_[p])) continue;
            may_end = true;
            if (rest_fits_after(0, bytes.substr(p), steps, true)) return true;
          }
          if (!may_end) refused_at = d + 1;
          return false;
        }
        const auto byte = static_cast<uint8_t>(bytes[d]);
        if (dfa.accepting(automaton_walk_[d]) && closing == byte) {
          return rest_fits_after(automaton_walk_[d], bytes.substr(d), steps, false);
        }
        refused_at = d + 1;  // no match goes on with this byte: nor does any token that shares it
        return false;
      });
  return steps;
}

bool GrammarGuide::rest_fits_after(uint32_t automaton_state, std::string_view rest, size_t& steps,
                                   bool from_parent) {
  rest_key_.assign(reinterpret_cast<const char*>(&automaton_state), sizeof(automaton_state));
  rest_key_.append(rest);
  if (const auto known = rests_.find(rest_key_); known != rests_.end()) return known->second;
  if (from_parent) {
    // Most rests are refused at their first byte: that is asked once per byte, not per rest.
    int8_t& takes = parent_takes_[static_cast<uint8_t>(rest[0])];
    if (takes == kUnknown) {
      ++steps;
      takes = matcher_.advance(parent_, static_cast<uint8_t>(rest[0]), scratch_[1]) ? 1 : 0;
    }
    if (takes == 0) return false;
    scratch_[0] = parent_;
  } else {
    scratch_[0] = state_;
    matcher_.set_automaton_state(scratch_[0], automaton_state);
  }
  bool fits = true;
  for (const char byte : rest) {
    ++steps;
    if (!matcher_.advance(scratch_[0], static_cast<uint8_t>(byte), scratch_[1])) {
      fits = false;
      break;
    }
    std::swap(scratch_[0], scratch_[1]);
  }
  rests_.emplace(rest_key_, fits);
  return fits;
}

}  // namespace headway::serving::guided
