#include "headway/serving/text_decoder.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "headway/core/utf8.h"

namespace headway::serving {
namespace {

// Ids kept before the first undecoded one, so that a tokenizer whose text for a token depends on
// the one before (SentencePiece drops the leading space of the first piece it decodes) decodes the
// new ids in context. vLLM keeps 5 for the same reason.
constexpr size_t kContextTokens = 5;
// More are kept while the last kContextTokens have no text at all (special tokens skipped, ids
// outside the vocabulary), up to this many: a tokenizer that drops a first space would otherwise
// read the next id as the first of a text and drop its space.
constexpr size_t kMaxContextTokens = 32;
// Ids that may arrive without any text while a character is incomplete. UTF-8 needs at most 4
// bytes per character, so a character still incomplete after this many ids never will be, and its
// bytes are given out (as U+FFFD) rather than held forever.
constexpr size_t kMaxHeldTokens = 8;
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

class TextDecoder final : public IncrementalDecoder {
 public:
  TextDecoder(const core::Tokenizer& tokenizer, DecodeOptions options)
      : tokenizer_(tokenizer),
        stop_token_ids_(std::move(options.stop_token_ids)),
        keep_stop_string_(options.keep_stop_string),
        min_tokens_(options.min_tokens),
        skip_special_tokens_(options.skip_special_tokens),
        end_of_sequence_(options.end_of_sequence),
        // SentencePiece decodes an incomplete byte sequence to U+FFFD instead of returning the
        // bytes; a trailing U+FFFD from it means "wait", as in vLLM.
        replacement_means_incomplete_(tokenizer.decodes_incomplete_characters_as_replacement()),
        drops_first_space_(tokenizer.drops_first_space()) {
    for (std::string& s : options.stop_strings) {
      if (!s.empty()) stops_.push_back(std::move(s));
    }
    if (drops_first_space_) prime(options.context);
  }

  std::string append(std::span<const int32_t> ids) override {
    if (stopped_) return {};
    // A stop token id ends the request, so it can only be the last id; its text is not part of
    // the answer (vLLM leaves it out too), though the id is.
    if (const std::optional<int32_t> stop =
            trailing_stop_token(ids, stop_token_ids_, appended_, min_tokens_)) {
      stop_token_ = stop;
      ids = ids.first(ids.size() - 1);
    }
    // No stop string may end in the text of the first min_tokens ids, but one may begin there and
    // end in a later id's text (vLLM looks back len(stop) - 1 characters before the new text of
    // the first id past min_tokens), so that text is held back like any other.
    std::string out;
    if (appended_ < min_tokens_) {
      const size_t early = std::min<size_t>(ids.size(), min_tokens_ - appended_);
      take_text_of(ids.first(early), held_);
      unsearched_ = held_.size();
      text_ends_.clear();
      out = release({}, false);
      ids = ids.subspan(early);
      if (ids.empty()) return out;
    }
    std::string text;
    text_ends_.clear();
    if (stops_.empty()) {
      take_text_of(ids, text);
    } else {
      // Where each id's text ends: a stop string's match then names the id that completed it.
      for (size_t i = 0; i < ids.size(); ++i) {
        take_text_of(ids.subspan(i, 1), text);
        text_ends_.push_back(text.size());
      }
    }
    out += release(text, false);
    return out;
  }

  size_t ids_before_stop() const override { return ids_before_stop_; }

  std::string token_bytes(int32_t id) const override {
    // After an anchor where the tokenizer drops a first space: "▁with" names " with".
    if (!anchor_) anchor_ = core::decode_anchor(tokenizer_);
    std::string bytes = core::token_bytes(tokenizer_, *anchor_, id);
    // A special token (an end token, "<|python_tag|>") is named as it is written, as vLLM names
    // it: decoded as text it is nothing, and two of them among the top tokens would share
    // completions' key "" (helper-207).
    if (bytes.empty()) bytes = tokenizer_.decode_with_special_tokens(std::span(&id, 1));
    return bytes;
  }

  StopReason stop_reason() const override {
    if (stopped_) return matched_;
    return stop_reason_of(stop_token_, end_of_sequence_);
  }

  std::string flush() override {
    if (stopped_) return {};
    text_ends_.clear();  // the held text is no one id's: a stop there takes every id
    return release(take_new_text(0, true), true);
  }

 private:
  // Starts the window with the last ids of `context`, read already, unless their text ends in an
  // incomplete character (then the first output decodes without them, as when there are none).
  void prime(std::span<const int32_t> context) {
    context = context.last(context_to_keep(context));
    if (context.empty() || decode(context).ends_with(kReplacement)) return;
    window_.assign(context.begin(), context.end());
    read_ = window_.size();
  }

  // How many of the last of `ids` to keep as context: kContextTokens, or more (up to
  // kMaxContextTokens) for a tokenizer that drops a first space while those have no text.
  size_t context_to_keep(std::span<const int32_t> ids) const {
    size_t keep = std::min(ids.size(), kContextTokens);
    if (!drops_first_space_) return keep;
    const size_t most = std::min(ids.size(), kMaxContextTokens);
    while (keep < most && decode(ids.last(keep)).empty()) ++keep;
    return keep;
  }

  // Adds `ids` to the window one at a time, appending the text each makes final to `text`. One
  // at a time, because how long an incomplete character has waited is counted in ids: read
  // together, a character completed by a later id of the same read would otherwise come out where
  // a reader of one id at a time gave it up as U+FFFD, and the text would depend on how many ids
  // a read brought. Each id costs two decodes of a window of kContextTokens + 1 ids (more only
  // while a SentencePiece character waits for its ids, or after ids without text), and for a
  // tokenizer that drops a first space one more of the kContextTokens it keeps.
  void take_text_of(std::span<const int32_t> ids, std::string& text) {
    for (const int32_t id : ids) {
      window_.push_back(id);
      ++appended_;
      text += take_new_text(1, false);
    }
  }

  // Decodes the ids not yet turned into text (`added` of them arrived just now) and returns the
  // complete characters that are now known (valid UTF-8); the bytes of a character still
  // incomplete stay in bytes_, unless `final` or it has waited kMaxHeldTokens ids.
  std::string take_new_text(size_t added, bool final) {
    // SentencePiece: hold the ids of an incomplete character undecoded (its text would be U+FFFD).
    const bool wait_more = !final && tail_age_ + added < kMaxHeldTokens;
    if (read_ < window_.size()) {
      const std::string before = decode(std::span(window_).first(read_));
      const std::string all = decode(window_);
      const std::string_view fresh =
          all.size() > before.size() ? std::string_view(all).substr(before.size()) : "";
      if (replacement_means_incomplete_ && wait_more && fresh.ends_with(kReplacement)) {
        tail_age_ += added;
        return {};  // wait for the ids that complete the character; decode them together
      }
      bytes_ += fresh;
      read_ = window_.size();
      if (read_ > kContextTokens) {
        const size_t keep = context_to_keep(window_);
        window_.erase(window_.begin(), window_.end() - static_cast<ptrdiff_t>(keep));
        read_ = keep;
      }
    }
    // Byte-level tokenizers decode a multi-byte character's bytes from separate tokens, and their
    // decoding is a concatenation, so the bytes can be assembled here.
    const size_t ready = bytes_.size() - core::utf8::incomplete_tail(bytes_);
    std::string text;
    core::utf8::append_valid(std::string_view(bytes_).substr(0, ready), text);
    bytes_.erase(0, ready);
    // The age of the held character: restarts when text went out (the character began in this
    // call's ids), grows while it waits.
    tail_age_ = bytes_.empty() ? 0 : (text.empty() ? tail_age_ + added : 0);
    if (!bytes_.empty() && (final || tail_age_ >= kMaxHeldTokens)) {
      core::utf8::append_valid(bytes_, text);
      bytes_.clear();
      tail_age_ = 0;
    }
    return text;
  }

  std::string decode(std::span<const int32_t> ids) const {
    return skip_special_tokens_ ? tokenizer_.decode(ids)
                                : tokenizer_.decode_with_special_tokens(ids);
  }

  // Adds `text` to what is held back and returns what is now final: everything before a stop
  // string that matched, or everything except the tail that may still begin one.
  // `text_ends_` says which of the last ids brought which part of `text` (empty: none does).
  std::string release(std::string_view text, bool final) {
    const size_t held_before = held_.size();
    held_ += text;
    // The stop that a reader of one byte at a time would see complete first: the earliest end,
    // then the earliest start. So the match (and the text, when the stop string is kept) does not
    // depend on how many tokens one read brings.
    size_t first = std::string::npos;
    size_t first_end = std::string::npos;
    for (const std::string& stop : stops_) {
      // A match must end past the text of the first min_tokens ids.
      const size_t from = unsearched_ >= stop.size() ? unsearched_ + 1 - stop.size() : 0;
      const size_t at = held_.find(stop, from);
      if (at == std::string::npos) continue;
      const size_t end = at + stop.size();
      if (end < first_end || (end == first_end && at < first)) {
        first = at;
        first_end = end;
        matched_ = stop;
      }
    }
    if (first != std::string::npos) {
      stopped_ = true;
      // The answer ends with the id whose text completed the stop (it was not complete before
      // `text`, so it ends inside it); the ids after it are not the answer's.
      ids_before_stop_ = appended_;
      if (!text_ends_.empty()) {
        const auto by =
            std::lower_bound(text_ends_.begin(), text_ends_.end(), first_end - held_before);
        ids_before_stop_ -= static_cast<size_t>(text_ends_.end() - by) - 1;
      }
      held_.resize(keep_stop_string_ ? first + matched_.size() : first);
      window_.clear();
      read_ = 0;
      bytes_.clear();
      return std::exchange(held_, {});
    }
    if (final) {
      unsearched_ = 0;
      return std::exchange(held_, {});
    }
    size_t keep = 0;
    for (const std::string& stop : stops_) {
      // The longest suffix of held_ that is a proper prefix of `stop`.
      for (size_t k = std::min(held_.size(), stop.size() - 1); k > keep; --k) {
        if (std::string_view(held_).substr(held_.size() - k) ==
            std::string_view(stop).substr(0, k)) {
          keep = k;
          break;
        }
      }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    unsearched_ -= std::min(unsearched_, out.size());
    return out;
  }

  const core::Tokenizer& tokenizer_;
  const std::vector<int32_t> stop_token_ids_;
  const bool keep_stop_string_;  // the matched stop string's text is output too
  const uint32_t min_tokens_;    // ids whose text is not searched for stop strings
  const bool skip_special_tokens_;
  const int32_t end_of_sequence_;  // a stop token that is not a stop_reason
  size_t appended_ = 0;            // ids given to append() so far (a trailing stop id not counted)
  size_t ids_before_stop_ = 0;     // ids up to the one that completed a stop string
  std::vector<size_t> text_ends_;  // append(): each id's end in its text (reused, no allocation)
  const bool replacement_means_incomplete_;
  const bool drops_first_space_;
  std::vector<std::string> stops_;
  // token_bytes()' anchor, found at its first call (requests without logprobs never need it).
  mutable std::optional<std::optional<core::DecodeAnchor>> anchor_;
  std::vector<int32_t> window_;  // recent ids: [0, read_) already text, [read_, end) not yet
  size_t read_ = 0;
  std::string bytes_;      // decoded bytes of an incomplete character (at most 3)
  size_t tail_age_ = 0;    // ids that arrived while the character in bytes_ waited
  std::string held_;       // final text withheld because it may begin a stop string
  size_t unsearched_ = 0;  // held_'s first bytes, from the first min_tokens ids: no stop ends there
  bool stopped_ = false;
  std::string matched_;                // the stop string that matched (set with stopped_)
  std::optional<int32_t> stop_token_;  // the stop token id that arrived
};

}  // namespace

std::unique_ptr<IncrementalDecoder> make_incremental_decoder(const core::Tokenizer& tokenizer,
                                                             DecodeOptions options) {
  return std::make_unique<TextDecoder>(tokenizer, std::move(options));
}

}  // namespace headway::serving
