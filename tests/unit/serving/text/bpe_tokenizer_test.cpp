// Hugging Face byte-level BPE (core::BpeTokenizer through core::Tokenizer::load): GPT-2's byte
// alphabet, merge order, Llama 3 pre-tokenization, added tokens, BOS/EOS, and every refusal.
// Expected ids are derived by hand from the tiny vocabulary in tiny_bpe.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/tokenizer.h>

#include <cstdio>
#include <functional>
#include <thread>

#include "byte_level_alphabet.h"
#include "tiny_bpe.h"

namespace headway::serving {
namespace {

using core::Error;
using core::Tokenizer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TinyBpe;
using testing::write_text;
using testing::write_tiny_bpe;

const std::string kSpace = "\xC4\xA0";  // 'Ġ' (U+0120), the byte-level symbol of ' '

std::unique_ptr<Tokenizer> load(const TempDir& dir, const TinyBpe& spec) {
  write_tiny_bpe(dir.path(), spec);
  return Tokenizer::load(dir.path());
}

std::string load_error(const TempDir& dir) {
  try {
    Tokenizer::load(dir.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Loads a tokenizer.json edited by `edit` and returns the error it is refused with.
template <typename Edit>
std::string refusal(const std::string& name, Edit edit) {
  TempDir dir(name);
  nlohmann::json j = testing::tiny_bpe_json({});
  edit(j);
  write_text(dir.path() / "tokenizer.json", j.dump());
  return load_error(dir);
}

TEST(ByteLevelAlphabet, FollowsGpt2sTable) {
  using core::byte_level::code_point_of;
  EXPECT_EQ(code_point_of(0x00), 0x100u);
  EXPECT_EQ(code_point_of('\t'), 0x109u);  // 'ĉ'
  EXPECT_EQ(code_point_of('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(code_point_of(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(code_point_of('!'), static_cast<char32_t>('!'));
  EXPECT_EQ(code_point_of('~'), static_cast<char32_t>('~'));
  EXPECT_EQ(code_point_of(0x7F), 0x121u);  // the 34th unprintable byte
  EXPECT_EQ(code_point_of(0xA0), 0x142u);
  EXPECT_EQ(code_point_of(0xA1), 0xA1u);
  EXPECT_EQ(code_point_of(0xAD), 0x143u);  // the soft hyphen, the last unprintable one
  EXPECT_EQ(code_point_of(0xFF), 0xFFu);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(core::byte_level::decode(core::byte_level::encode(all)), all);
  EXPECT_EQ(core::byte_level::encode(" a\n"), kSpace + "a\xC4\x8A");
  EXPECT_EQ(core::byte_level::decode("\xE4\xB8\x80"), std::nullopt);  // '一' is not a symbol
  EXPECT_EQ(core::byte_level::decode("\xC4"
                                     "A"),
            std::nullopt);  // truncated symbol
}

TEST(BpeTokenizer, AppliesMergesInRankOrder) {
  TempDir dir("bpe_merges");
  // 256 Ġt, 257 he, 258 Ġthe, 259 ca, 260 cat, 261 Ġcat
  const auto tok = load(dir, {.merges = {{kSpace, "t"},
                                         {"h", "e"},
                                         {kSpace + "t", "he"},
                                         {"c", "a"},
                                         {"ca", "t"},
                                         {kSpace, "cat"}}});
  EXPECT_EQ(tok->kind(), "bpe");
  // "the": h+e (rank 1); no merge makes "the" from t + he.  " the": Ġ+t, h+e, Ġt+he.
  EXPECT_THAT(tok->encode("the"), ElementsAre('t', 257));
  EXPECT_THAT(tok->encode(" the cat"), ElementsAre(258, 261));
  EXPECT_THAT(tok->encode("cat the"), ElementsAre(260, 258));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{258, 261}), " the cat");
  EXPECT_EQ(tok->vocab_size(), static_cast<uint32_t>(testing::kEotId + 1));
}

TEST(BpeTokenizer, LowerRankWinsWhenMergesCompete) {
  TempDir a("bpe_rank_a"), b("bpe_rank_b");
  const auto bc_first = load(a, {.merges = {{"b", "c"}, {"a", "b"}}});  // 256 bc, 257 ab
  const auto ab_first = load(b, {.merges = {{"a", "b"}, {"b", "c"}}});  // 256 ab, 257 bc
  EXPECT_THAT(bc_first->encode("abc"), ElementsAre('a', 256));
  EXPECT_THAT(ab_first->encode("abc"), ElementsAre(256, 'c'));
  // Equal pairs merge left to right: "aaa" -> aa + a.
  TempDir c("bpe_rank_c");
  const auto aa = load(c, {.merges = {{"a", "a"}}});
  EXPECT_THAT(aa->encode("aaa"), ElementsAre(256, 'a'));
  EXPECT_THAT(aa->encode("aaaa"), ElementsAre(256, 256));
}

TEST(BpeTokenizer, MergesMayBeWrittenAsPairs) {
  TempDir dir("bpe_pairs");
  const auto tok = load(dir, {.merges = {{"c", "a"}, {"ca", "t"}}, .merges_as_pairs = true});
  EXPECT_THAT(tok->encode("cat"), ElementsAre(257));
}

TEST(BpeTokenizer, Llama3PatternDecidesWhereMergesMayApply) {
  TempDir dir("bpe_llama3_split");
  // 256 Ġ1, 257 12, 258 123, 259 45, 260 34, 261 'm, 262 Ã© (é), 263 fÃ©
  const auto tok = load(dir, {.merges = {{kSpace, "1"},
                                         {"1", "2"},
                                         {"12", "3"},
                                         {"4", "5"},
                                         {"3", "4"},
                                         {"'", "m"},
                                         {"\xC3\x83", "\xC2\xA9"},
                                         {"f", "\xC3\x83\xC2\xA9"}}});
  // " 1": a space before a digit is its own piece, so Ġ1 never forms.
  EXPECT_THAT(tok->encode(" 1"), ElementsAre(' ', '1'));
  // Digits go in groups of three: 123|45, so "3 4" cannot merge across the boundary.
  EXPECT_THAT(tok->encode("12345"), ElementsAre(258, 259));
  // Contractions are pieces of their own, case-insensitively.
  EXPECT_THAT(tok->encode("I'm"), ElementsAre('I', 261));
  EXPECT_THAT(tok->encode("I'M"), ElementsAre('I', '\'', 'M'));  // piece "'M", no merge for it
  // é is a letter (Unicode properties): "café" is one piece, and its bytes C3 A9 merge.
  EXPECT_THAT(tok->encode("café!"), ElementsAre('c', 'a', 263, '!'));
}

TEST(BpeTokenizer, Gpt2ByteLevelPatternAndPrefixSpace) {
  TempDir dir("bpe_gpt2");
  TinyBpe spec{.merges = {{kSpace, "1"}, {"h", "i"}, {kSpace, "hi"}}};  // 256 Ġ1, 257 hi, 258 Ġhi
  spec.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  const auto gpt2 = load(dir, spec);
  EXPECT_THAT(gpt2->encode(" 1"), ElementsAre(256));  // GPT-2's " ?\p{N}+" keeps them together
  EXPECT_THAT(gpt2->encode("hi hi"), ElementsAre(257, 258));
  TempDir dir2("bpe_prefix");
  spec.pre_tokenizer["add_prefix_space"] = true;
  const auto prefixed = load(dir2, spec);
  EXPECT_THAT(prefixed->encode("hi"), ElementsAre(258));
  EXPECT_THAT(prefixed->encode(" hi"), ElementsAre(258));  // no second space
}

TEST(BpeTokenizer, SplitOnALiteralString) {
  TempDir a("bpe_split_string"), b("bpe_split_none");
  TinyBpe spec{.merges = {{"a", "-"}}};  // 256 a-
  spec.pre_tokenizer = {
      {"type", "Sequence"},
      {"pretokenizers", nlohmann::json::array({{{"type", "Split"},
                                                {"pattern", {{"String", "-"}}},
                                                {"behavior", "Isolated"},
                                                {"invert", false}},
                                               {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  EXPECT_THAT(load(a, spec)->encode("a-b"), ElementsAre('a', '-', 'b'));
  spec.pre_tokenizer = {{"type", "ByteLevel"}, {"use_regex", false}};  // no split at all
  EXPECT_THAT(load(b, spec)->encode("a-b"), ElementsAre(256, 'b'));
}

// A Split pattern with capturing groups splits as without them: only the whole match counts
// (the matcher keeps no room for groups, and PCRE2 then reports a match with rc 0).
TEST(BpeTokenizer, APatternWithCapturingGroupsSplitsByItsWholeMatches) {
  TempDir a("bpe_split_groups"), b("bpe_split_plain");
  TinyBpe spec{.merges = {{"a", "-"}}};  // 256 a-
  const auto split_on = [&](const std::string& regex) {
    spec.pre_tokenizer = {
        {"type", "Sequence"},
        {"pretokenizers", nlohmann::json::array({{{"type", "Split"},
                                                  {"pattern", {{"Regex", regex}}},
                                                  {"behavior", "Isolated"},
                                                  {"invert", false}},
                                                 {{"type", "ByteLevel"}, {"use_regex", false}}})}};
    return spec;
  };
  const auto grouped = load(a, split_on("(-)(b)?"));
  const auto plain = load(b, split_on("-b?"));
  for (const std::string text : {"a-b", "a-a-", "xa-", "-b-ba-"}) {
    EXPECT_EQ(grouped->encode(text), plain->encode(text)) << text;
  }
  EXPECT_THAT(grouped->encode("a-b"), ElementsAre('a', '-', 'b'));
}

TEST(BpeTokenizer, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  TempDir a("bpe_ignore_on"), b("bpe_ignore_off");
  const auto on = load(a, {.ignore_merges = true, .extra_vocab = {"abc"}});  // "abc" = 256
  const auto off = load(b, {.ignore_merges = false, .extra_vocab = {"abc"}});
  EXPECT_THAT(on->encode("abc"), ElementsAre(256));
  EXPECT_THAT(off->encode("abc"), ElementsAre('a', 'b', 'c'));
}

TEST(BpeTokenizer, AddedTokensAreMatchedBeforePreTokenization) {
  TempDir dir("bpe_added");
  const auto tok = load(dir, {.merges = {{"h", "i"}}});  // 256 hi
  EXPECT_THAT(tok->encode("<|start_header_id|>hi<|end_header_id|>\n\n"),
              ElementsAre(testing::kStartHeader, 256, testing::kEndHeader, '\n', '\n'));
  EXPECT_THAT(tok->encode("x<|eot_id|><|eot_id|>"),
              ElementsAre('x', testing::kEotId, testing::kEotId));
  EXPECT_THAT(tok->encode("<|eot"), ElementsAre('<', '|', 'e', 'o', 't'));
  // Special tokens decode to nothing; ids outside the vocabulary too.
  EXPECT_EQ(
      tok->decode(std::vector<int32_t>{testing::kBeginOfText, 256, testing::kEotId, 5000, -1, 999}),
      "hi");
  EXPECT_EQ(tok->special_token_text(testing::kBeginOfText), "<|begin_of_text|>");
  EXPECT_EQ(tok->special_token_text('a'), "");
  // Kept, they are their text (skip_special_tokens: false); ids outside the vocabulary are not.
  EXPECT_EQ(tok->decode_with_special_tokens(
                std::vector<int32_t>{testing::kBeginOfText, 256, testing::kEotId, 5000, -1}),
            "<|begin_of_text|>hi<|eot_id|>");
}

TEST(BpeTokenizer, RoundTripsAnyBytes) {
  TempDir dir("bpe_roundtrip");
  const auto tok = load(dir, {.merges = {{kSpace, "t"}, {"h", "e"}, {kSpace + "t", "he"}}});
  const std::string texts[] = {
      "",
      "Hello, world! The answer is 42.",
      "naïve café — 日本語 🙂\tTabs\r\nand  spaces   ",
      "I'll say it's 1,234,567.89 dollars\n\n\n",
      std::string("\xff\xfe invalid \xc3 utf-8 \x80"),
      std::string("\0zero\0", 6),
      "<|begin_of_text|>mixed<|eot_id|>",  // decodes without the special tokens
  };
  for (const std::string& text : texts) {
    const auto ids = tok->encode(text);
    std::string expected = text;
    for (const std::string special : {"<|begin_of_text|>", "<|eot_id|>"}) {
      for (size_t at; (at = expected.find(special)) != std::string::npos;) {
        expected.erase(at, special.size());
      }
    }
    EXPECT_EQ(tok->decode(ids), expected) << text;
  }
}

TEST(BpeTokenizer, LongWordsAndWhitespaceRunsDoNotExplode) {
  TempDir dir("bpe_long");
  const auto tok = load(dir, {.merges = {{"a", "a"}, {"aa", "aa"}}});  // 256 aa, 257 aaaa
  // One 200,000-letter piece: a quadratic merge loop would not finish; the heap does.
  const std::string word(200000, 'a');
  const auto ids = tok->encode(word);
  ASSERT_EQ(ids.size(), 50000u);
  EXPECT_TRUE(std::all_of(ids.begin(), ids.end(), [](int32_t id) { return id == 257; }));
  const std::string spaces = std::string(100000, ' ') + "x";
  EXPECT_EQ(tok->decode(tok->encode(spaces)), spaces);
}

TEST(BpeTokenizer, ConcurrentEncodesAgree) {
  TempDir dir("bpe_threads");
  const auto tok = load(dir, {.merges = {{kSpace, "t"}, {"h", "e"}, {kSpace + "t", "he"}}});
  const std::string text = "the quick brown fox, the lazy dog; 123 456 — the end.";
  const auto expected = tok->encode(text);
  std::vector<std::thread> threads;
  // Not std::vector<bool>: its elements share words, so threads setting their own would race.
  std::vector<char> same(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      bool ok = true;
      for (int i = 0; i < 200; ++i) ok = ok && tok->encode(text) == expected;
      same[t] = ok ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_THAT(same, ::testing::Each(1));
}

TEST(BpeTokenizer, BosAndEosComeFromTokenizerConfig) {
  TempDir dir("bpe_specials");
  const auto tok = load(dir, {});
  EXPECT_EQ(tok->bos(), testing::kBeginOfText);
  EXPECT_EQ(tok->eos(), testing::kEotId);  // {"content": ...} form
}

TEST(BpeTokenizer, BosAndEosFallBackToConfigJson) {
  TempDir dir("bpe_config_ids");
  write_tiny_bpe(dir.path(), {.write_tokenizer_config = false});
  auto tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok->bos(), -1);
  EXPECT_EQ(tok->eos(), -1);
  write_text(dir.path() / "config.json", R"({"bos_token_id": 1000, "eos_token_id": [1004, 1001]})");
  tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok->bos(), testing::kBeginOfText);
  EXPECT_EQ(tok->eos(), testing::kEotId);  // the first of Llama 3.1's list
  write_text(dir.path() / "config.json", R"({"bos_token_id": 99999})");
  EXPECT_THAT(load_error(dir), HasSubstr("config.json: field 'bos_token_id'"));
}

// From helper-207's review: Qwen 2, 2.5 and 3 say "bos_token": null in tokenizer_config.json and
// bos_token_id 151643 (<|endoftext|>) in config.json; the fallback to config.json put that token
// before every prompt, which neither Hugging Face nor vLLM does. An explicit null is no BOS.
TEST(BpeTokenizer, ANullBosTokenIsNoneWhateverConfigJsonSays) {
  TempDir dir("bpe_null_bos");
  write_tiny_bpe(dir.path(), {});
  write_text(dir.path() / "tokenizer_config.json",
             R"({"bos_token": null, "eos_token": "<|eot_id|>", "add_bos_token": false})");
  write_text(dir.path() / "config.json", R"({"bos_token_id": 1000, "eos_token_id": 1001})");
  const auto tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok->bos(), -1);
  EXPECT_FALSE(tok->adds_bos());
  EXPECT_EQ(tok->eos(), testing::kEotId);
}

// add_bos_token false: the BOS is known (templates render bos_token) but a text prompt does not
// begin with it; true or absent, it does.
TEST(BpeTokenizer, AddBosTokenSaysWhetherATextPromptBeginsWithTheBos) {
  TempDir dir("bpe_add_bos");
  write_tiny_bpe(dir.path(), {});
  EXPECT_TRUE(Tokenizer::load(dir.path())->adds_bos());
  write_text(dir.path() / "tokenizer_config.json",
             R"({"bos_token": "<|begin_of_text|>", "add_bos_token": false})");
  auto tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok->bos(), testing::kBeginOfText);
  EXPECT_FALSE(tok->adds_bos());
  write_text(dir.path() / "tokenizer_config.json",
             R"({"bos_token": "<|begin_of_text|>", "add_bos_token": "no"})");
  EXPECT_THAT(load_error(dir), HasSubstr("tokenizer_config.json: field 'add_bos_token' must be "
                                         "true or false"));
}

TEST(BpeTokenizer, UnknownSpecialTokenInTokenizerConfigIsRefused) {
  TempDir dir("bpe_bad_config");
  write_tiny_bpe(dir.path(), {});
  write_text(dir.path() / "tokenizer_config.json", R"({"bos_token": "<s>"})");
  const std::string error = load_error(dir);
  EXPECT_THAT(error, HasSubstr("tokenizer_config.json: field 'bos_token' names '<s>'"));
  write_text(dir.path() / "tokenizer_config.json", "{not json");
  EXPECT_THAT(load_error(dir), HasSubstr("tokenizer_config.json: invalid JSON"));
}

// The Qwen 2 family's normalizer: a prompt is composed (NFC) before it is pre-tokenized, so a
// decomposed "é" encodes as the composed one; added tokens are matched in the text as written.
TEST(BpeTokenizer, AnNfcNormalizerComposesThePromptFirst) {
  TempDir dir("bpe_nfc");
  nlohmann::json j = testing::tiny_bpe_json({});
  const std::string decomposed = "e\xCC\x81<|eot_id|>A\xCC\x8A";
  write_text(dir.path() / "tokenizer.json", j.dump());
  EXPECT_THAT(Tokenizer::load(dir.path())->encode(decomposed),
              ElementsAre('e', 0xCC, 0x81, testing::kEotId, 'A', 0xCC, 0x8A));
  j["normalizer"] = {{"type", "NFC"}};
  write_text(dir.path() / "tokenizer.json", j.dump());
  const auto tok = Tokenizer::load(dir.path());
  EXPECT_THAT(tok->encode(decomposed), ElementsAre(0xC3, 0xA9, testing::kEotId, 0xC3, 0x85));
  EXPECT_EQ(tok->decode(tok->encode("caf\xC3\xA9")), "caf\xC3\xA9");
}

// Loads the tiny tokenizer.json edited by `edit` from a fresh directory `name`.
template <typename Edit>
std::unique_ptr<Tokenizer> load_edited(const TempDir& dir, Edit edit) {
  nlohmann::json j = testing::tiny_bpe_json({});
  edit(j);
  write_text(dir.path() / "tokenizer.json", j.dump());
  return Tokenizer::load(dir.path());
}

// ByteLevel's add_prefix_space after a Split: Hugging Face puts the space before every piece the
// Split made that does not start with one, not once before the whole text ("a1" is " a", " 1").
TEST(BpeTokenizer, AByteLevelPrefixSpaceGoesBeforeEveryPieceASplitMade) {
  TempDir dir("bpe_split_prefix");
  TinyBpe spec{.merges = {{kSpace, "a"}, {kSpace, "1"}}};  // 256 Ġa, 257 Ġ1
  nlohmann::json llama3 = testing::tiny_bpe_json(spec)["pre_tokenizer"];
  llama3["pretokenizers"][1]["add_prefix_space"] = true;
  spec.pre_tokenizer = llama3;
  const auto tok = load(dir, spec);
  EXPECT_THAT(tok->encode("a1"), ElementsAre(256, 257));
  EXPECT_THAT(tok->encode(" a1"), ElementsAre(256, 257));
  EXPECT_THAT(tok->encode("a\n"), ElementsAre(256, ' ', '\n'));  // " \n": no merge for it
}

// `\s` in a pattern is Unicode's White_Space, as in Oniguruma (Hugging Face's engine): U+180E, the
// Mongolian vowel separator, is not (PCRE2's `\s` takes it), so "\u180E!" is one piece of
// Llama 3's ` ?[^\s\p{L}\p{N}]+`, and the merge of its last byte with "!" applies.
TEST(BpeTokenizer, TheMongolianVowelSeparatorIsNotWhiteSpace) {
  TempDir dir("bpe_u180e");
  const auto tok = load(dir, {.merges = {{core::byte_level::symbol_of(0x8E), "!"}}});  // 256
  EXPECT_THAT(tok->encode("\xE1\xA0\x8E!"), ElementsAre(0xE1, 0xA0, 256));
  // A real white-space character still ends the piece: U+3000, the ideographic space.
  EXPECT_THAT(tok->encode("\xE3\x80\x80!"), ElementsAre(0xE3, 0x80, 0x80, '!'));
}

// A pattern with a construct the \\s rewrite does not follow (a comment, extended mode) is compiled
// as written, so the rewrite can never change what it means: here a '[' in a comment would have
// made the scan take the \\s for one inside a class.
TEST(BpeTokenizer, APatternTheWhiteSpaceRewriteCannotFollowKeepsItsMeaning) {
  TempDir dir("bpe_regex_comment");
  TinyBpe spec{.merges = {{"a", "b"}}};  // 256 ab
  spec.pre_tokenizer = {
      {"type", "Sequence"},
      {"pretokenizers", nlohmann::json::array({{{"type", "Split"},
                                                {"pattern", {{"Regex", "(?#[)\\s"}}},
                                                {"behavior", "Isolated"},
                                                {"invert", false}},
                                               {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  const auto tok = load(dir, spec);
  // Split at the space: "ab" and "ab" merge on either side of it.
  EXPECT_THAT(tok->encode("ab ab"), ElementsAre(256, ' ', 256));
}

// What Oniguruma (Hugging Face's engine) and PCRE2 read differently is refused, naming the field.
TEST(BpeTokenizer, ConstructsTheTwoRegexEnginesReadDifferentlyAreRefused) {
  const auto refused = [](const std::string& name, const std::string& regex) {
    return refusal(name, [&](nlohmann::json& j) {
      j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = regex;
    });
  };
  EXPECT_THAT(refused("r_hex", "\\h+"),
              AllOf(HasSubstr("pre_tokenizer.pretokenizers[0].pattern.Regex"),
                    HasSubstr("\\h means a hexadecimal digit to Oniguruma")));
  EXPECT_THAT(refused("r_vtab", "[^\\v]+"), HasSubstr("\\v means the vertical tab to Oniguruma"));
  EXPECT_THAT(refused("r_flag_m", "(?m:a.b)"), HasSubstr("the flag m means a dot that matches"));
  EXPECT_THAT(refused("r_flag_m_alone", "(?im)a"), HasSubstr("the flag m"));
  // An escaped backslash before the letter is not the escape.
  EXPECT_EQ(refused("r_escaped", "\\\\h"), "(no error)");
}

// ^ and $ match at every line, as Oniguruma's do: "b$" matches before a newline too.
TEST(BpeTokenizer, AnchorsMatchAtEveryLine) {
  TempDir dir("bpe_regex_anchors");
  TinyBpe spec{.merges = {{"a", "b"}, {"b", "\xC4\x8A"}}};  // 256 ab, 257 b\n (Ċ)
  spec.pre_tokenizer = {
      {"type", "Sequence"},
      {"pretokenizers", nlohmann::json::array({{{"type", "Split"},
                                                {"pattern", {{"Regex", "b$"}}},
                                                {"behavior", "Isolated"},
                                                {"invert", false}},
                                               {{"type", "ByteLevel"}, {"use_regex", false}}})}};
  const auto tok = load(dir, spec);
  // "ab\nab": both b's end a line, so each is a piece: a | b | \n a | b.
  EXPECT_THAT(tok->encode("ab\nab"), ElementsAre('a', 'b', '\n', 'a', 'b'));
}

// Added tokens with `normalized: false` (the special ones, as tokenizer.json writes them) are
// found in the text first; the others only in what is left. In "abc" the special "bc" wins over
// the plain "ab" that starts before it, as in Hugging Face's tokenizers.
TEST(BpeTokenizer, AddedTokensThatAreNotNormalizedAreMatchedFirst) {
  TempDir dir("bpe_added_passes");
  const auto tok = load_edited(dir, [](nlohmann::json& j) {
    j["added_tokens"].push_back(testing::added_token_json(1010, "ab", false, true));
    j["added_tokens"].push_back(testing::added_token_json(1011, "bc", true, false));
  });
  EXPECT_THAT(tok->encode("abc"), ElementsAre('a', 1011));
  EXPECT_THAT(tok->encode("abxab"), ElementsAre(1010, 'x', 1010));
}

// With an NFC normalizer, a `normalized` added token is matched in the composed text: ">" and a
// combining solidus compose to "≯" (no "<t>" left to match), and the Ohm sign U+2126 composes to
// the "Ω" U+03A9 of an added token.
TEST(BpeTokenizer, NormalizedAddedTokensAreMatchedInTheComposedText) {
  TempDir dir("bpe_added_nfc");
  const auto tok = load_edited(dir, [](nlohmann::json& j) {
    j["normalizer"] = {{"type", "NFC"}};
    j["added_tokens"].push_back(testing::added_token_json(1010, "<t>", false, true));
    j["added_tokens"].push_back(testing::added_token_json(1011, "\xCE\xA9", false, true));
  });
  EXPECT_THAT(tok->encode("<t>\xCC\xB8"), ElementsAre('<', 't', 0xE2, 0x89, 0xAF));
  EXPECT_THAT(tok->encode("<t>"), ElementsAre(1010));
  EXPECT_THAT(tok->encode("\xE2\x84\xA6"), ElementsAre(1011));
}

// A `normalized` added token is kept composed, as Hugging Face keeps it, and decodes so: the
// Angstrom sign U+212B composes to "Å" U+00C5, a character of the byte-level alphabet that stands
// for the byte 0xC5.
TEST(BpeTokenizer, ANormalizedAddedTokenDecodesFromItsComposedContent) {
  TempDir dir("bpe_added_nfc_decode");
  const auto tok = load_edited(dir, [](nlohmann::json& j) {
    j["normalizer"] = {{"type", "NFC"}};
    j["added_tokens"].push_back(testing::added_token_json(1010, "\xE2\x84\xAB", false, true));
  });
  EXPECT_THAT(tok->encode("\xC3\x85"), ElementsAre(1010));
  EXPECT_THAT(tok->encode("\xE2\x84\xAB"), ElementsAre(1010));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1010}), "\xC5");
}

// An added token decodes as Hugging Face's ByteLevel decoder has it: content written in the
// byte-level alphabet stands for the bytes of its symbols ("ĠĠ" two spaces, "ï" the byte 0xEF), any
// other content for itself.
TEST(BpeTokenizer, AnAddedTokenDecodesAsTheByteLevelDecoderHasIt) {
  TempDir dir("bpe_added_decode");
  const auto tok = load_edited(dir, [](nlohmann::json& j) {
    j["added_tokens"].push_back(testing::added_token_json(1010, kSpace + kSpace, false, true));
    j["added_tokens"].push_back(testing::added_token_json(1011, "na\xC3\xAFve", false, true));
    j["added_tokens"].push_back(testing::added_token_json(1012, "<|a b|>", true, false));
  });
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1010}), "  ");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1011}), "na\xEFve");
  EXPECT_EQ(tok->decode_with_special_tokens(std::vector<int32_t>{1012, testing::kEotId}),
            "<|a b|><|eot_id|>");
  EXPECT_EQ(tok->special_token_text(1012), "<|a b|>");
}

using testing::kMeta;
using testing::tiny_sentencepiece_bpe_json;

std::unique_ptr<Tokenizer> load_json(const TempDir& dir, const nlohmann::json& j) {
  write_text(dir.path() / "tokenizer.json", j.dump());
  return Tokenizer::load(dir.path());
}

TEST(SentencePieceBpe, EncodesCharactersWithByteFallbackAsLlama2Does) {
  TempDir dir("spbpe_llama2");
  const auto tok = load_json(dir, tiny_sentencepiece_bpe_json());
  EXPECT_TRUE(tok->drops_first_space());
  EXPECT_FALSE(tok->decodes_incomplete_characters_as_replacement());
  // "Hi Hi" is "▁Hi▁Hi" after the normalizer: one word, merged twice.
  EXPECT_THAT(tok->encode("Hi Hi"), ElementsAre(266, 266));
  // "é" is not in the vocabulary: its bytes' tokens, C3 and A9.
  EXPECT_THAT(tok->encode("H\xC3\xA9"), ElementsAre(265, 3 + 0xC3, 3 + 0xA9));
  // After a special token the Prepend normalizer starts the next stretch with '▁' again (Llama 2's
  // tokenizer.json, legacy).
  EXPECT_THAT(tok->encode("<s>Hi"), ElementsAre(1, 266));
  EXPECT_THAT(tok->encode(""), ElementsAre());
  // Decoding: '▁' is a space, bytes that make UTF-8 are text, the first space is stripped.
  EXPECT_EQ(tok->decode(std::vector<int32_t>{266, 266}), "Hi Hi");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{265, 3 + 0xC3, 3 + 0xA9}), "H\xC3\xA9");
  // A run of byte tokens that is not UTF-8 stays bytes (Tokenizer::decode's contract), as does one
  // cut short: the next id may complete it.
  EXPECT_EQ(tok->decode(std::vector<int32_t>{266, 3 + 0xC3, 3 + 0x41}), "Hi\xC3\x41");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{266, 3 + 0xC3}), "Hi\xC3");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 266, 2}), "Hi");
  EXPECT_EQ(tok->decode_with_special_tokens(std::vector<int32_t>{1, 266, 2}), "<s> Hi</s>");
}

// Without byte_fallback a character outside the vocabulary is <unk>, one for a run with fuse_unk.
TEST(SentencePieceBpe, UnknownCharactersFuseIntoOneUnknownToken) {
  TempDir dir("spbpe_unk");
  nlohmann::json j = tiny_sentencepiece_bpe_json();
  j["model"]["byte_fallback"] = false;
  const auto tok = load_json(dir, j);
  EXPECT_THAT(tok->encode("H\xC3\xA9\xC3\xA9i"), ElementsAre(265, 0, 261));
  j["model"]["fuse_unk"] = false;
  TempDir dir2("spbpe_unk_unfused");
  EXPECT_THAT(load_json(dir2, j)->encode("H\xC3\xA9\xC3\xA9i"), ElementsAre(265, 0, 0, 261));
}

// Mistral v0.3's form: no normalizer, a Metaspace pre-tokenizer that prepends '▁' only to the
// text's first stretch, and a Metaspace decoder (which drops the first token's '▁').
TEST(SentencePieceBpe, AMetaspacePreTokenizerPrependsToTheFirstStretchOnly) {
  TempDir dir("spbpe_metaspace");
  nlohmann::json j = tiny_sentencepiece_bpe_json();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "first"}, {"split", false}};
  j["decoder"] = {
      {"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "first"}, {"split", false}};
  const auto tok = load_json(dir, j);
  EXPECT_THAT(tok->encode("Hi Hi"), ElementsAre(266, 266));
  EXPECT_THAT(tok->encode("</s>Hi"), ElementsAre(2, 260, 261));  // not the first stretch
  EXPECT_EQ(tok->decode(std::vector<int32_t>{266, 266}), "Hi Hi");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{260, 266}), "H Hi");
}

TEST(SentencePieceBpe, RefusesWhatItDoesNotImplementNamingTheField) {
  using nlohmann::json;
  const auto refused = [](const std::string& name, const std::function<void(json&)>& edit) {
    TempDir dir(name);
    json j = tiny_sentencepiece_bpe_json();
    edit(j);
    write_text(dir.path() / "tokenizer.json", j.dump());
    return load_error(dir);
  };
  EXPECT_THAT(refused("sp_no_bytes", [](json& j) { j["model"]["vocab"].erase("<0x7F>"); }),
              HasSubstr("field 'model.vocab' has no token <0x7F>: byte_fallback needs all 256"));
  EXPECT_THAT(refused("sp_no_unk",
                      [](json& j) {
                        j["model"]["byte_fallback"] = false;
                        j["model"]["unk_token"] = nullptr;
                      }),
              HasSubstr("field 'model.unk_token' is needed"));
  EXPECT_THAT(refused("sp_decoder",
                      [](json& j) {
                        j["decoder"] = {{"type", "WordPiece"}};
                      }),
              HasSubstr("field 'decoder' of type 'WordPiece' is not supported"));
  EXPECT_THAT(refused("sp_no_decoder", [](json& j) { j["decoder"] = nullptr; }),
              HasSubstr("field 'decoder' is missing"));
  // Sequences nested deeper than any real file: refused (a hostile file could nest them as deep
  // as its JSON, and the reader recurses).
  EXPECT_THAT(refused("sp_deep",
                      [](json& j) {
                        json decoder = {{"type", "Fuse"}};
                        for (int i = 0; i < 50; ++i) {
                          decoder = {{"type", "Sequence"}, {"decoders", json::array({decoder})}};
                        }
                        j["decoder"] = std::move(decoder);
                      }),
              HasSubstr("nests Sequences more than 8 deep"));
  EXPECT_THAT(refused("sp_regex",
                      [](json& j) {
                        j["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}};
                      }),
              HasSubstr("field 'normalizer.normalizers[1].pattern' must be {\"String\": ...}"));
  EXPECT_THAT(
      refused("sp_scheme",
              [](json& j) {
                j["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}};
              }),
      HasSubstr("field 'pre_tokenizer.prepend_scheme' 'sometimes' is not always"));
}

TEST(BpeTokenizer, RefusesWhatItDoesNotImplementNamingTheField) {
  using nlohmann::json;
  EXPECT_THAT(refusal("r_norm",
                      [](json& j) {
                        j["normalizer"] = {{"type", "NFKC"}};
                      }),
              AllOf(HasSubstr("tokenizer.json: field 'normalizer'"), HasSubstr("NFKC"),
                    HasSubstr("implements NFC, Prepend, Replace")));
  EXPECT_THAT(refusal("r_norm_shape", [](json& j) { j["normalizer"] = "NFC"; }),
              HasSubstr("tokenizer.json: field 'normalizer.type' is missing"));
  EXPECT_THAT(refusal("r_type", [](json& j) { j["model"]["type"] = "WordPiece"; }),
              AllOf(HasSubstr("tokenizer.json: model.type 'WordPiece' is not supported")));
  EXPECT_THAT(refusal("r_fallback", [](json& j) { j["model"]["byte_fallback"] = true; }),
              HasSubstr("field 'model.byte_fallback'"));
  EXPECT_THAT(refusal("r_prefix", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }),
              HasSubstr("field 'model.continuing_subword_prefix'"));
  EXPECT_THAT(refusal("r_byte", [](json& j) { j["model"]["vocab"].erase("\xC4\xA0"); }),
              HasSubstr("has no token for byte 0x20"));
  EXPECT_THAT(refusal("r_merge",
                      [](json& j) {
                        j["model"]["merges"] = {"a b", "x zz"};
                      }),
              HasSubstr("field 'model.merges[0]' makes 'ab'"));
  EXPECT_THAT(refusal("r_merge2", [](json& j) { j["model"]["merges"] = {"abc"}; }),
              HasSubstr("field 'model.merges[0]' 'abc' is not two tokens"));
  EXPECT_THAT(refusal("r_digits",
                      [](json& j) {
                        j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Digits"}};
                      }),
              HasSubstr("field 'pre_tokenizer.pretokenizers[0].type' 'Digits' is not supported"));
  EXPECT_THAT(refusal("r_regex",
                      [](json& j) {
                        j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
                      }),
              AllOf(HasSubstr("pre_tokenizer.pretokenizers[0].pattern.Regex"),
                    HasSubstr("does not compile")));
  EXPECT_THAT(
      refusal("r_behavior",
              [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }),
      HasSubstr("field 'pre_tokenizer.pretokenizers[0].behavior' 'Removed'"));
  EXPECT_THAT(refusal("r_no_bytelevel",
                      [](json& j) { j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0]; }),
              HasSubstr("field 'pre_tokenizer' has no ByteLevel step"));
  // Without a ByteLevel decoder either, it would be SentencePiece-style BPE, whose pre-tokenizer
  // is Metaspace or none.
  EXPECT_THAT(refusal("r_no_bytelevel_at_all",
                      [](json& j) {
                        j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0];
                        j["decoder"] = {{"type", "Fuse"}};
                      }),
              HasSubstr("field 'pre_tokenizer' of type 'Split' is not supported: a byte-level BPE "
                        "ends its pre-tokenizer with ByteLevel"));
  EXPECT_THAT(refusal("r_no_pre", [](json& j) { j["pre_tokenizer"] = nullptr; }),
              HasSubstr("field 'pre_tokenizer' is missing: byte-level BPE needs a ByteLevel"));
  EXPECT_THAT(refusal("r_decoder",
                      [](json& j) {
                        j["decoder"] = {{"type", "Metaspace"}};
                      }),
              HasSubstr("field 'decoder' of type 'Metaspace' is not supported"));
  EXPECT_THAT(refusal("r_lstrip", [](json& j) { j["added_tokens"][2]["lstrip"] = true; }),
              HasSubstr("field 'added_tokens[2].lstrip'"));
  EXPECT_THAT(refusal("r_vocab", [](json& j) { j["model"]["vocab"]["zz"] = "seven"; }),
              HasSubstr("field 'model.vocab[\"zz\"]' must be a non-negative token id"));
  EXPECT_THAT(refusal("r_alphabet", [](json& j) { j["model"]["vocab"]["日本"] = 999; }),
              HasSubstr("is not written in the byte-level alphabet"));
  EXPECT_THAT(refusal("r_huge_id", [](json& j) { j["model"]["vocab"]["zz"] = 2000000000; }),
              HasSubstr("token id 2000000000 is beyond the supported"));
  EXPECT_THAT(refusal("r_json", [](json& j) { j = "just a string"; }),
              HasSubstr("field 'model' is missing"));
}

TEST(TokenizerLoad, SentencePieceIsRefusedWithoutTheSentencePieceLibrary) {
  // This test links headway_text only, as a gRPC-serving process does.
  TempDir dir("spm_refused");
  write_text(dir.path() / "tokenizer.model", "whatever");
  EXPECT_THAT(load_error(dir),
              AllOf(HasSubstr("tokenizer.model (SentencePiece) cannot be loaded in a process that "
                              "also serves gRPC"),
                    HasSubstr("use a checkpoint with tokenizer.json")));
  // A tokenizer.json beside it is used instead.
  write_tiny_bpe(dir.path(), {});
  EXPECT_EQ(Tokenizer::load(dir.path())->kind(), "bpe");
}

TEST(TokenizerLoad, NamesTheDirectoryWhenNothingIsThere) {
  TempDir dir("tok_empty");
  EXPECT_THAT(load_error(dir), HasSubstr("no tokenizer.json"));
}

}  // namespace
}  // namespace headway::serving
