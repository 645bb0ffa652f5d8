// Reads a Hugging Face tokenizer.json (byte-level BPE) into BpeTokenizer::Tables, refusing every
// feature it does not implement by naming the file and the field: a silently different
// tokenization would be a wrong prompt, which is worse than no prompt.
#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <headway/core/utf8.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bpe_tables.h"
#include "byte_level_alphabet.h"
#include "text_steps.h"
#include "tokenizer_json_fields.h"

namespace headway::core {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer pattern, which Hugging Face's ByteLevel pre-tokenizer applies when
// use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// SentencePiece-style BPE: the one-character tokens, the <0xXX> tokens of byte_fallback, and the
// unknown token for a character that has neither.
void read_character_symbols(const JsonFields& f, const json& model, BpeTokenizer::Tables& t) {
  for (const auto& [token, id] : t.vocab) {
    if (!token.empty() && utf8::complete_length(token) == token.size()) {
      t.character_ids.emplace(utf8::first_code_point(token), id);
    }
  }
  t.byte_fallback = f.flag(model, "byte_fallback", false, "model.byte_fallback");
  if (t.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      const std::string token = name;
      const auto it = t.vocab.find(token);
      if (it == t.vocab.end()) {
        f.fail("model.vocab", "has no token " + token + ": byte_fallback needs all 256");
      }
      t.fallback_ids[b] = it->second;
    }
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string unk = f.string(model["unk_token"], "model.unk_token");
    const auto it = t.vocab.find(unk);
    if (it == t.vocab.end()) f.fail("model.unk_token", "'" + unk + "' is not in model.vocab");
    t.unk = it->second;
  }
  if (!t.byte_fallback && t.unk < 0) {
    f.fail("model.unk_token",
           "is needed: without byte_fallback a character outside the "
           "vocabulary has no other token");
  }
  t.fuse_unk = f.flag(model, "fuse_unk", false, "model.fuse_unk");
}

void read_model(const JsonFields& f, const json& model, BpeTokenizer::Tables& t) {
  const std::string type = f.string(f.at(model, "type", "model.type"), "model.type");
  if (type != "BPE") f.fail("model.type", "'" + type + "' is not supported (only \"BPE\")");
  f.must_be_unset(model, "dropout", json(0.0), "model.dropout", "BPE dropout is for training");
  f.must_be_unset(model, "continuing_subword_prefix", json(""), "model.continuing_subword_prefix",
                  "only byte-level BPE without subword markers is supported");
  f.must_be_unset(model, "end_of_word_suffix", json(""), "model.end_of_word_suffix",
                  "only byte-level BPE without subword markers is supported");
  t.ignore_merges = f.flag(model, "ignore_merges", false, "model.ignore_merges");

  const json& vocab = f.at(model, "vocab", "model.vocab");
  if (!vocab.is_object()) f.fail("model.vocab", "must be an object of token -> id");
  for (const auto& [token, id] : vocab.items()) {
    const int32_t value = f.id(id, "model.vocab[\"" + token + "\"]");
    if (!t.vocab.emplace(token, value).second) {
      f.fail("model.vocab[\"" + token + "\"]", "is listed twice");
    }
  }
  if (t.characters) {
    read_character_symbols(f, model, t);
  } else {
    f.must_be_unset(model, "byte_fallback", json(false), "model.byte_fallback",
                    "a byte-level BPE has a token for every byte already");
    for (int b = 0; b < 256; ++b) {
      const auto it = t.vocab.find(byte_level::symbol_of(static_cast<uint8_t>(b)));
      if (it == t.vocab.end()) {
        std::ostringstream hex;
        hex << std::hex << b;
        f.fail("model.vocab", "has no token for byte 0x" + hex.str() + " ('" +
                                  byte_level::symbol_of(static_cast<uint8_t>(b)) +
                                  "'): a byte-level BPE vocabulary covers all 256 bytes");
      }
      t.byte_ids[b] = it->second;
    }
  }

  const json& merges = f.at(model, "merges", "model.merges");
  if (!merges.is_array()) f.fail("model.merges", "must be an array");
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    const json& m = merges[i];
    std::string left, right;
    if (m.is_string()) {
      // "a b": tokens never contain a plain space (byte-level BPE writes it 'Ġ', SentencePiece
      // '▁').
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        f.fail(field, "'" + s + "' is not two tokens separated by one space");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      f.fail(field, "must be \"left right\" or [\"left\", \"right\"]");
    }
    const auto l = t.vocab.find(left), r = t.vocab.find(right), merged = t.vocab.find(left + right);
    if (l == t.vocab.end()) f.fail(field, "names '" + left + "', which is not in model.vocab");
    if (r == t.vocab.end()) f.fail(field, "names '" + right + "', which is not in model.vocab");
    if (merged == t.vocab.end()) {
      f.fail(field, "makes '" + left + right + "', which is not in model.vocab");
    }
    t.merges.add(l->second, r->second, merged->second, static_cast<int32_t>(i));
  }
}

void read_added_tokens(const JsonFields& f, const json& root, BpeTokenizer::Tables& t,
                       std::vector<AddedToken>& added) {
  if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return;
  const json& list = root["added_tokens"];
  if (!list.is_array()) f.fail("added_tokens", "must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    AddedToken token;
    token.id = f.id(f.at(list[i], "id", field + ".id"), field + ".id");
    token.content = f.string(f.at(list[i], "content", field + ".content"), field + ".content");
    if (token.content.empty()) f.fail(field + ".content", "is empty");
    token.special = f.flag(list[i], "special", false, field + ".special");
    token.normalized = f.flag(list[i], "normalized", !token.special, field + ".normalized");
    for (const char* option : {"lstrip", "rstrip", "single_word"}) {
      f.must_be_unset(list[i], option, json(false), field + "." + option,
                      "added tokens that absorb whitespace or match whole words only are not "
                      "implemented");
    }
    t.added_text[token.id] = token.content;
    added.push_back(std::move(token));
  }
}

// One pre-tokenizer step; `field` is its path ("pre_tokenizer", "pre_tokenizer.pretokenizers[0]").
void read_pre_tokenizer_step(const JsonFields& f, const json& step, const std::string& field,
                             BpeTokenizer::Tables& t, bool& saw_byte_level) {
  const std::string type = f.string(f.at(step, "type", field + ".type"), field + ".type");
  if (saw_byte_level) {
    f.fail(field, "follows ByteLevel: ByteLevel must be the last pre-tokenizer step");
  }
  if (type == "ByteLevel") {
    saw_byte_level = true;
    t.add_prefix_space = f.flag(step, "add_prefix_space", false, field + ".add_prefix_space");
    t.prefix_after_splitters = t.splitters.size();
    if (f.flag(step, "use_regex", true, field + ".use_regex")) {
      t.splitters.push_back(
          std::make_unique<RegexSplitter>(kGpt2Pattern, false, f.file() + ": " + field));
    }
  } else if (type == "Split") {
    const json& pattern = f.at(step, "pattern", field + ".pattern");
    const std::string behavior =
        f.string(f.at(step, "behavior", field + ".behavior"), field + ".behavior");
    if (behavior != "Isolated") {
      f.fail(field + ".behavior", "'" + behavior + "' is not supported (only \"Isolated\")");
    }
    f.must_be_unset(step, "invert", json(false), field + ".invert", "inverted splits");
    if (pattern.is_object() && pattern.contains("Regex")) {
      t.splitters.push_back(
          std::make_unique<RegexSplitter>(f.string(pattern["Regex"], field + ".pattern.Regex"),
                                          false, f.file() + ": " + field + ".pattern.Regex"));
    } else if (pattern.is_object() && pattern.contains("String")) {
      t.splitters.push_back(
          std::make_unique<RegexSplitter>(f.string(pattern["String"], field + ".pattern.String"),
                                          true, f.file() + ": " + field + ".pattern.String"));
    } else {
      f.fail(field + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
    }
  } else {
    f.fail(field + ".type", "'" + type +
                                "' is not supported (Headway implements Split, ByteLevel and a "
                                "Sequence of them)");
  }
}

// Byte-level BPE has a ByteLevel pre-tokenizer step and decoder; SentencePiece-style BPE no
// pre-tokenizer (Llama 2: its normalizer writes the spaces as '▁') or a Metaspace one (Mistral
// v0.3), and a decoder of its own.
bool is_sentencepiece_style(const json& root) {
  const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json();
  const auto byte_level = [](const json& step) {
    return step.is_object() && step.value("type", json()) == "ByteLevel";
  };
  if (byte_level(pre) || (root.contains("decoder") && byte_level(root["decoder"]))) return false;
  if (pre.is_object() && pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    for (const json& step : pre["pretokenizers"]) {
      if (byte_level(step)) return false;
    }
  }
  return true;
}

// SentencePiece-style BPE: no pre-tokenizer, or Metaspace (alone or as a Sequence of one).
void read_sentencepiece_pre_tokenizer(const JsonFields& f, const json& pre,
                                      BpeTokenizer::Tables& t) {
  if (pre.is_null()) return;
  const json* step = &pre;
  std::string field = "pre_tokenizer";
  if (pre.is_object() && pre.value("type", json()) == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 1) {
    step = &pre["pretokenizers"][0];
    field = "pre_tokenizer.pretokenizers[0]";
  }
  const std::string type = f.string(f.at(*step, "type", field + ".type"), field + ".type");
  if (type != "Metaspace") {
    f.fail(field, "of type '" + type +
                      "' is not supported: a byte-level BPE ends its pre-tokenizer with ByteLevel, "
                      "a SentencePiece-style one has none or Metaspace");
  }
  t.metaspace_words = true;
  t.metaspace = read_metaspace(f, *step, field);
}

void read_pre_tokenizer(const JsonFields& f, const json& root, BpeTokenizer::Tables& t) {
  const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json();
  if (t.characters) {
    read_sentencepiece_pre_tokenizer(f, pre, t);
    return;
  }
  if (pre.is_null()) {
    f.fail("pre_tokenizer", "is missing: byte-level BPE needs a ByteLevel pre-tokenizer");
  }
  bool saw_byte_level = false;
  const std::string type = f.string(f.at(pre, "type", "pre_tokenizer.type"), "pre_tokenizer.type");
  if (type == "Sequence") {
    const json& steps = f.at(pre, "pretokenizers", "pre_tokenizer.pretokenizers");
    if (!steps.is_array()) f.fail("pre_tokenizer.pretokenizers", "must be an array");
    for (size_t i = 0; i < steps.size(); ++i) {
      read_pre_tokenizer_step(f, steps[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]",
                              t, saw_byte_level);
    }
  } else {
    read_pre_tokenizer_step(f, pre, "pre_tokenizer", t, saw_byte_level);
  }
  if (!saw_byte_level) {
    f.fail("pre_tokenizer", "has no ByteLevel step, which a ByteLevel decoder needs");
  }
}

// A special token named in tokenizer_config.json: "text" or {"content": "text", ...} or null.
int32_t config_token(const std::filesystem::path& file, const json& config, const char* key,
                     const BpeTokenizer::Tables& t) {
  if (!config.contains(key) || config[key].is_null()) return -2;  // not set here
  const json& value = config[key];
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    text = value["content"].get<std::string>();
  } else {
    throw Error(file.string() + ": field '" + key + "' must be a string or {\"content\": ...}");
  }
  for (const auto& [id, content] : t.added_text) {
    if (content == text) return id;
  }
  throw Error(file.string() + ": field '" + key + "' names '" + text +
              "', which is not among tokenizer.json's added_tokens");
}

// bos_token_id / eos_token_id of config.json: an id, a list of ids (the first is used) or null.
int32_t config_id(const std::filesystem::path& file, const json& config, const char* key,
                  uint32_t vocab_size) {
  if (!config.contains(key) || config[key].is_null()) return -1;
  json value = config[key];
  if (value.is_array() && !value.empty()) value = value[0];
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() >= static_cast<int64_t>(vocab_size)) {
    throw Error(file.string() + ": field '" + key + "' = " + config[key].dump() +
                " is not a token id below the vocabulary size " + std::to_string(vocab_size));
  }
  return value.get<int32_t>();
}

}  // namespace

std::unique_ptr<const BpeTokenizer::Tables> load_bpe_tables(const std::filesystem::path& dir,
                                                            const json& root) {
  const std::filesystem::path file = dir / "tokenizer.json";
  auto t = std::make_unique<BpeTokenizer::Tables>();
  t->where = file.string();
  const JsonFields f(file.string());
  if (!root.is_object()) throw Error(file.string() + ": not a JSON object");

  t->normalizer = read_normalizer(f, root);
  t->characters = is_sentencepiece_style(root);
  // The pre-tokenizer first: it says which of the two kinds of BPE this is, and so what the model
  // must hold.
  read_pre_tokenizer(f, root, *t);
  read_model(f, f.at(root, "model", "model"), *t);
  std::vector<AddedToken> added;
  read_added_tokens(f, root, *t, added);
  const json& decoder = root.contains("decoder") ? root["decoder"] : json();
  const std::string decoder_type =
      decoder.is_object() && decoder.contains("type") && decoder["type"].is_string()
          ? decoder["type"].get<std::string>()
          : std::string("none");
  if (t->characters) {
    t->decoder = read_sentencepiece_decoder(f, root);
  } else if (decoder_type != "ByteLevel") {
    f.fail("decoder", "of type '" + decoder_type + "' is not supported (only ByteLevel)");
  }

  // The id -> bytes table: vocabulary entries are byte-level symbols, added tokens their content.
  int64_t highest = -1;
  for (const auto& [token, id] : t->vocab) highest = std::max<int64_t>(highest, id);
  for (const AddedToken& a : added) highest = std::max<int64_t>(highest, a.id);
  // Real vocabularies stay below a million ids; a sparse id far beyond would only waste memory.
  constexpr int64_t kMaxTokenId = 16'000'000;
  if (highest > kMaxTokenId) {
    throw Error(file.string() + ": token id " + std::to_string(highest) +
                " is beyond the supported " + std::to_string(kMaxTokenId));
  }
  t->vocab_size = static_cast<uint32_t>(highest + 1);
  std::vector<std::string>& decoded = t->characters ? t->text_of : t->bytes_of;
  decoded.assign(t->vocab_size, std::string());
  t->special.assign(t->vocab_size, false);
  for (const auto& [token, id] : t->vocab) {
    if (t->characters) {
      t->text_of[id] = token;
      continue;
    }
    std::optional<std::string> bytes = byte_level::decode(token);
    if (!bytes) {
      f.fail("model.vocab[\"" + token + "\"]",
             "is not written in the byte-level alphabet (is this a byte-level BPE?)");
    }
    t->bytes_of[id] = std::move(*bytes);
  }
  for (AddedToken& a : added) {
    // A token matched after normalization is found in normalized text: normalize it too (Hugging
    // Face keeps it so: its id_to_token gives the Angstrom sign's token as "Å", U+00C5).
    if (a.normalized && !t->normalizer.empty()) a.content = normalize(t->normalizer, a.content);
    if (a.content.empty()) {
      f.fail("added_tokens", "has a token (id " + std::to_string(a.id) +
                                 ") that the normalizer turns into nothing");
    }
    if (t->characters) {
      t->text_of[a.id] = a.content;
    } else {
      // As Hugging Face's ByteLevel decoder treats every token: content written in the
      // byte-level alphabet stands for the bytes its symbols do ("ĠĠ" for two spaces, as the
      // vocabulary entry of that id would), other content for itself ("<|eot_id|>" is both).
      t->bytes_of[a.id] = byte_level::decode(a.content).value_or(a.content);
    }
    t->special[a.id] = a.special;
    AddedTokenIndex& index = a.normalized ? t->normalized_added : t->raw_added;
    index.by_first_byte[static_cast<uint8_t>(a.content[0])].push_back(std::move(a));
    index.empty = false;
  }
  for (AddedTokenIndex* index : {&t->raw_added, &t->normalized_added}) {
    for (auto& bucket : index->by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(), [](const AddedToken& a, const AddedToken& b) {
        return a.content.size() > b.content.size();
      });
    }
  }

  // BOS/EOS: tokenizer_config.json names them (what chat templates see as bos_token/eos_token);
  // config.json's ids are the fallback.
  int32_t bos = -2, eos = -2;
  if (const auto config = dir / "tokenizer_config.json"; std::filesystem::exists(config)) {
    const json j = read_json_file(config);
    if (!j.is_object()) throw Error(config.string() + ": not a JSON object");
    bos = config_token(config, j, "bos_token", *t);
    eos = config_token(config, j, "eos_token", *t);
    // "bos_token": null (Qwen2, 2.5, 3) says the tokenizer has none, as Hugging Face reads it:
    // config.json's bos_token_id is the model's, not a token to put before prompts.
    if (j.contains("bos_token") && j["bos_token"].is_null()) bos = -1;
    if (j.contains("add_bos_token")) {
      if (!j["add_bos_token"].is_boolean()) {
        throw Error(config.string() + ": field 'add_bos_token' must be true or false");
      }
      t->add_bos = j["add_bos_token"].get<bool>();
    }
  }
  if (bos == -2 || eos == -2) {
    json j;
    const auto config = dir / "config.json";
    if (std::filesystem::exists(config)) j = read_json_file(config);
    if (!j.is_object()) j = json::object();
    if (bos == -2) bos = config_id(config, j, "bos_token_id", t->vocab_size);
    if (eos == -2) eos = config_id(config, j, "eos_token_id", t->vocab_size);
  }
  t->bos = bos;
  t->eos = eos;
  return t;
}

}  // namespace headway::core
