#include "text_steps.h"

#include <headway/core/utf8.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "tokenizer_json_fields.h"
#include "unicode_nfc.h"

namespace headway::core {
namespace {

using nlohmann::json;

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t done = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, done)) {
    out.append(s, done, at - done).append(to);
    done = at + from.size();
  }
  if (done == 0) return;
  out.append(s, done);
  s = std::move(out);
}

// A string of exactly one character, as Hugging Face's Strip content and Metaspace replacement are.
std::string one_character(const JsonFields& f, const json& value, const std::string& field) {
  std::string text = f.string(value, field);
  if (text.empty() || utf8::complete_length(text) != text.size()) {
    f.fail(field, "must be one character, not '" + text + "'");
  }
  return text;
}

// A Replace step's String pattern and content (a Regex pattern is refused).
std::pair<std::string, std::string> read_replace(const JsonFields& f, const json& step,
                                                 const std::string& field) {
  const json& pattern = f.at(step, "pattern", field + ".pattern");
  if (!pattern.is_object() || !pattern.contains("String")) {
    f.fail(field + ".pattern", "must be {\"String\": ...} (a Regex pattern is not supported)");
  }
  std::string from = f.string(pattern["String"], field + ".pattern.String");
  if (from.empty()) f.fail(field + ".pattern.String", "is empty");
  return {std::move(from), f.string(f.at(step, "content", field + ".content"), field + ".content")};
}

// Sequences within Sequences, as deep as a file may nest them (real ones nest none): a deeper
// file is refused rather than read by a recursion as deep as the JSON.
constexpr int kMaxSequenceDepth = 8;

void refuse_deep_sequence(const JsonFields& f, int depth, const std::string& field) {
  if (depth > kMaxSequenceDepth) {
    f.fail(field, "nests Sequences more than " + std::to_string(kMaxSequenceDepth) + " deep");
  }
}

void read_normalizer_step(const JsonFields& f, const json& step, const std::string& field,
                          std::vector<NormalizerStep>& steps, int depth = 0) {
  refuse_deep_sequence(f, depth, field);
  const std::string type = f.string(f.at(step, "type", field + ".type"), field + ".type");
  if (type == "NFC") {
    steps.push_back({NormalizerStep::Kind::kNfc, {}, {}});
  } else if (type == "Prepend") {
    steps.push_back({NormalizerStep::Kind::kPrepend,
                     f.string(f.at(step, "prepend", field + ".prepend"), field + ".prepend"),
                     {}});
  } else if (type == "Replace") {
    auto [from, to] = read_replace(f, step, field);
    steps.push_back({NormalizerStep::Kind::kReplace, std::move(from), std::move(to)});
  } else if (type == "Sequence") {
    const json& list = f.at(step, "normalizers", field + ".normalizers");
    if (!list.is_array()) f.fail(field + ".normalizers", "must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      read_normalizer_step(f, list[i], field + ".normalizers[" + std::to_string(i) + "]", steps,
                           depth + 1);
    }
  } else {
    f.fail(field, "of type \"" + type +
                      "\" is not supported (Headway implements NFC, Prepend, Replace of a String "
                      "and a Sequence of them)");
  }
}

// The Metaspace prepend scheme of `step`: prepend_scheme, else the older add_prefix_space.
Metaspace::Prepend read_prepend(const JsonFields& f, const json& step, const std::string& field) {
  if (step.contains("prepend_scheme") && !step["prepend_scheme"].is_null()) {
    const std::string scheme = f.string(step["prepend_scheme"], field + ".prepend_scheme");
    if (scheme == "always") return Metaspace::Prepend::kAlways;
    if (scheme == "first") return Metaspace::Prepend::kFirst;
    if (scheme == "never") return Metaspace::Prepend::kNever;
    f.fail(field + ".prepend_scheme", "'" + scheme + "' is not always, first or never");
  }
  return f.flag(step, "add_prefix_space", true, field + ".add_prefix_space")
             ? Metaspace::Prepend::kAlways
             : Metaspace::Prepend::kNever;
}

void read_decoder_step(const JsonFields& f, const json& step, const std::string& field,
                       std::vector<DecoderStep>& steps, int depth = 0) {
  refuse_deep_sequence(f, depth, field);
  const std::string type = f.string(f.at(step, "type", field + ".type"), field + ".type");
  DecoderStep d;
  if (type == "Replace") {
    d.kind = DecoderStep::Kind::kReplace;
    std::tie(d.text, d.replacement) = read_replace(f, step, field);
  } else if (type == "ByteFallback") {
    d.kind = DecoderStep::Kind::kByteFallback;
  } else if (type == "Fuse") {
    d.kind = DecoderStep::Kind::kFuse;
  } else if (type == "Strip") {
    d.kind = DecoderStep::Kind::kStrip;
    d.text = one_character(f, f.at(step, "content", field + ".content"), field + ".content");
    for (auto [key, value] : {std::pair{"start", &d.start}, std::pair{"stop", &d.stop}}) {
      const json& n = f.at(step, key, field + "." + key);
      if (!n.is_number_unsigned() || n.get<uint64_t>() > 1024) {
        f.fail(field + "." + key, "must be a count of characters (0 to 1024)");
      }
      *value = n.get<uint32_t>();
    }
  } else if (type == "Metaspace") {
    d.kind = DecoderStep::Kind::kMetaspace;
    d.text = read_metaspace(f, step, field).replacement;
    d.prepended = read_prepend(f, step, field) != Metaspace::Prepend::kNever;
  } else if (type == "Sequence") {
    const json& list = f.at(step, "decoders", field + ".decoders");
    if (!list.is_array()) f.fail(field + ".decoders", "must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      read_decoder_step(f, list[i], field + ".decoders[" + std::to_string(i) + "]", steps,
                        depth + 1);
    }
    return;
  } else {
    f.fail(field, "of type '" + type +
                      "' is not supported for SentencePiece-style BPE (Headway implements "
                      "Metaspace, or a Sequence of Replace, ByteFallback, Fuse and Strip)");
  }
  steps.push_back(std::move(d));
}

// The byte of a byte-fallback token ("<0x41>"), or -1 for any other token.
int byte_of_token(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return -1;
  int value = 0;
  for (const char c : token.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// ByteFallback: each run of byte tokens becomes its bytes, as they are. Hugging Face writes a run
// that is not valid UTF-8 as one U+FFFD per token, which a run cut short by the end of the ids
// (the next id completes the character) is too: a stream, decoding a window of ids at a time,
// could then not tell text from an unfinished character, and one more id could turn text already
// shown into U+FFFD. The bytes are what core::Tokenizer::decode promises; the text decoder and
// the frontends make them valid UTF-8 (one U+FFFD per invalid sequence).
std::vector<std::string> fall_back_to_bytes(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string run;
  bool in_run = false;
  for (std::string& token : tokens) {
    if (const int byte = byte_of_token(token); byte >= 0) {
      run.push_back(static_cast<char>(byte));
      in_run = true;
      continue;
    }
    if (in_run) out.push_back(std::exchange(run, {}));
    in_run = false;
    out.push_back(std::move(token));
  }
  if (in_run) out.push_back(std::move(run));
  return out;
}

// Strip: up to `start` copies of `content` off the front of the token, `stop` off the back.
void strip(std::string& token, std::string_view content, uint32_t start, uint32_t stop) {
  if (content.empty()) return;
  size_t front = 0;
  for (uint32_t i = 0; i < start && token.compare(front, content.size(), content) == 0; ++i) {
    front += content.size();
  }
  size_t back = token.size();
  for (uint32_t i = 0; i < stop && back >= front + content.size() &&
                       token.compare(back - content.size(), content.size(), content) == 0;
       ++i) {
    back -= content.size();
  }
  token = token.substr(front, back - front);
}

}  // namespace

std::vector<NormalizerStep> read_normalizer(const JsonFields& f, const json& root) {
  std::vector<NormalizerStep> steps;
  if (root.contains("normalizer") && !root["normalizer"].is_null()) {
    read_normalizer_step(f, root["normalizer"], "normalizer", steps);
  }
  return steps;
}

std::string normalize(const std::vector<NormalizerStep>& steps, std::string_view text) {
  std::string s(text);
  for (const NormalizerStep& step : steps) {
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc:
        s = to_nfc(s);
        break;
      case NormalizerStep::Kind::kPrepend:
        if (!s.empty()) s.insert(0, step.text);
        break;
      case NormalizerStep::Kind::kReplace:
        replace_all(s, step.text, step.replacement);
        break;
    }
  }
  return s;
}

Metaspace read_metaspace(const JsonFields& f, const json& step, const std::string& field) {
  Metaspace m;
  if (step.contains("replacement") && !step["replacement"].is_null()) {
    m.replacement = one_character(f, step["replacement"], field + ".replacement");
  }
  m.prepend = read_prepend(f, step, field);
  m.split = f.flag(step, "split", true, field + ".split");
  return m;
}

void metaspace_words(const Metaspace& m, std::string_view stretch, bool at_start,
                     std::string& storage, std::vector<std::string_view>& words) {
  storage.assign(stretch);
  replace_all(storage, " ", m.replacement);
  const bool prepend = m.prepend == Metaspace::Prepend::kAlways ||
                       (m.prepend == Metaspace::Prepend::kFirst && at_start);
  if (prepend && !storage.starts_with(m.replacement)) storage.insert(0, m.replacement);
  const std::string_view all(storage);
  if (!m.split) {
    if (!all.empty()) words.push_back(all);
    return;
  }
  // Each replacement begins a word (Hugging Face's MergedWithNext).
  size_t begin = 0;
  for (size_t at = all.find(m.replacement, 1); at != std::string_view::npos;
       at = all.find(m.replacement, at + m.replacement.size())) {
    if (at > begin) words.push_back(all.substr(begin, at - begin));
    begin = at;
  }
  if (begin < all.size()) words.push_back(all.substr(begin));
}

std::vector<DecoderStep> read_sentencepiece_decoder(const JsonFields& f, const json& root) {
  if (!root.contains("decoder") || root["decoder"].is_null()) {
    f.fail("decoder", "is missing: SentencePiece-style BPE needs one to turn '\u2581' into spaces");
  }
  std::vector<DecoderStep> steps;
  read_decoder_step(f, root["decoder"], "decoder", steps);
  return steps;
}

std::string decode_tokens(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens) {
  for (const DecoderStep& step : steps) {
    switch (step.kind) {
      case DecoderStep::Kind::kReplace:
        for (std::string& token : tokens) replace_all(token, step.text, step.replacement);
        break;
      case DecoderStep::Kind::kByteFallback:
        tokens = fall_back_to_bytes(std::move(tokens));
        break;
      case DecoderStep::Kind::kFuse: {
        std::string all;
        for (const std::string& token : tokens) all += token;
        tokens.clear();
        tokens.push_back(std::move(all));
        break;
      }
      case DecoderStep::Kind::kStrip:
        for (std::string& token : tokens) strip(token, step.text, step.start, step.stop);
        break;
      case DecoderStep::Kind::kMetaspace:
        // Every replacement becomes a space, except in the first token, where Hugging Face drops
        // them all when the pre-tokenizer prepends one.
        for (size_t i = 0; i < tokens.size(); ++i) {
          replace_all(tokens[i], step.text, i == 0 && step.prepended ? "" : " ");
        }
        break;
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace headway::core
