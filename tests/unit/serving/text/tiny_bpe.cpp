#include "tiny_bpe.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace headway::serving::testing {

const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// GPT-2's byte -> symbol table, written out independently of core/src/byte_level_alphabet.cpp.
std::string symbol(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174))) ++n;
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

}  // namespace

nlohmann::json tiny_bpe_json(const TinyBpe& spec) {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[symbol(b)] = b;
  json merges = json::array();
  int32_t next = 256;
  for (const auto& [left, right] : spec.merges) {
    vocab[left + right] = next++;
    if (spec.merges_as_pairs) {
      merges.push_back(json::array({left, right}));
    } else {
      merges.push_back(left + " " + right);
    }
  }
  for (const std::string& token : spec.extra_vocab) vocab[token] = next++;
  if (next > kBeginOfText) throw std::logic_error("tiny BPE: too many merges");

  json added = json::array();
  const std::pair<int32_t, const char*> specials[] = {{kBeginOfText, "<|begin_of_text|>"},
                                                      {kEndOfText, "<|end_of_text|>"},
                                                      {kStartHeader, "<|start_header_id|>"},
                                                      {kEndHeader, "<|end_header_id|>"},
                                                      {kEotId, "<|eot_id|>"}};
  for (const auto& [id, content] : specials) {
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  json pre = spec.pre_tokenizer;
  if (pre.is_null()) {
    pre = {{"type", "Sequence"},
           {"pretokenizers", json::array({{{"type", "Split"},
                                           {"pattern", {{"Regex", kLlama3Pattern}}},
                                           {"behavior", "Isolated"},
                                           {"invert", false}},
                                          {{"type", "ByteLevel"},
                                           {"add_prefix_space", false},
                                           {"trim_offsets", true},
                                           {"use_regex", false}}})}};
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"post_processor",
           {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}}},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", spec.ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

void write_tiny_bpe(const std::filesystem::path& dir, const TinyBpe& spec) {
  write_text(dir / "tokenizer.json", tiny_bpe_json(spec).dump(1));
  if (spec.write_tokenizer_config) {
    nlohmann::json config = {{"bos_token", "<|begin_of_text|>"},
                             {"eos_token", {{"content", "<|eot_id|>"}, {"lstrip", false}}},
                             {"model_max_length", 8192}};
    if (!spec.chat_template.is_null()) config["chat_template"] = spec.chat_template;
    write_text(dir / "tokenizer_config.json", config.dump(1));
  }
}

TempDir::TempDir(const std::string& name) {
  path_ = std::filesystem::temp_directory_path() /
          ("headway_text_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

nlohmann::json added_token_json(int32_t id, const std::string& content, bool special,
                                bool normalized) {
  return {{"id", id},        {"content", content},       {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", normalized}, {"special", special}};
}

// A SentencePiece-style tokenizer.json as Llama 2 ships it: <unk>, <s>, </s>, the 256 byte tokens
// <0x00>..<0xFF> (ids 3 to 258), then characters (▁ 259, H 260, i 261) and the merges ▁ H (265
// "▁H") and ▁H i (266 "▁Hi"); a Prepend + Replace normalizer and the Replace, ByteFallback, Fuse,
// Strip decoder.
nlohmann::json tiny_sentencepiece_bpe_json() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  vocab[kMeta] = 259;
  vocab["H"] = 260;
  vocab["i"] = 261;
  vocab[kMeta + "H"] = 265;
  vocab[kMeta + "Hi"] = 266;
  return {{"version", "1.0"},
          {"added_tokens",
           {added_token_json(0, "<unk>", true, false), added_token_json(1, "<s>", true, false),
            added_token_json(2, "</s>", true, false)}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", kMeta}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}}}}},
          {"pre_tokenizer", nullptr},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", "<unk>"},
            {"byte_fallback", true},
            {"fuse_unk", true},
            {"vocab", vocab},
            {"merges", {kMeta + " H", kMeta + "H i"}}}}};
}

}  // namespace headway::serving::testing
