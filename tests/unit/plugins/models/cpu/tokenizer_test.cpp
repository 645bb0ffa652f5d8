// core::Tokenizer: the byte-level tokenizer of the built-in model (as make-tiny writes it) and
// SentencePiece (a model trained here with Debian's libsentencepiece), round trips and errors.
// Linking headway_tokenizers is what installs the SentencePiece loader into Tokenizer::load;
// byte-level BPE is tested in tests/unit/serving/text/.
#include "headway/core/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/byte_tokenizer.h>
#include <headway/core/error.h>
#include <sentencepiece_trainer.h>
#include <sys/stat.h>

#include <fstream>

#include "cpu_model_harness.h"
#include "tiny_checkpoint.h"

namespace headway::core {
namespace {

using models::cpu::testing::TempDir;
using ::testing::HasSubstr;

TEST(ByteTokenizer, LoadsWhatMakeTinyWritesAndRoundTrips) {
  TempDir dir("tok_byte");
  models::cpu::write_tiny_checkpoint(models::cpu::testing::small_spec(), dir.path());
  const auto tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok->kind(), "byte");
  EXPECT_EQ(tok->bos(), models::cpu::kTinyBosToken);
  EXPECT_EQ(tok->eos(), models::cpu::kTinyEosToken);
  EXPECT_EQ(tok->vocab_size(), 300u);
  for (const std::string text :
       {std::string("Hello, world!"), std::string(""),
        std::string("naïve café — 日本語 🙂"), std::string("\0\x01\xff binary", 10)}) {
    const auto ids = tok->encode(text);
    EXPECT_EQ(ids.size(), text.size());
    EXPECT_EQ(tok->decode(ids), text);
  }
  std::vector<int32_t> with_specials = {tok->bos(), 'h', 'i', tok->eos(), 299, -5};
  EXPECT_EQ(tok->decode(with_specials), "hi");
}

TEST(ByteTokenizer, WritesSpecialTokensOnlyWhenAskedTo) {
  TempDir dir("tok_byte_special");
  std::ofstream(dir.path() / "tokenizer.json")
      << R"({"model": {"type": "HeadwayByte"}, "added_tokens": [{"id": 256, "content": "<s>"},)"
      << R"( {"id": 257, "content": "</s>"}], "bos_token": "<s>", "eos_token": "</s>"})";
  const auto tok = Tokenizer::load(dir.path());
  const std::vector<int32_t> ids = {256, 'h', 'i', 257, 999};
  EXPECT_EQ(tok->decode(ids), "hi");
  EXPECT_EQ(tok->decode_with_special_tokens(ids), "<s>hi</s>");
}

TEST(ByteTokenizer, RejectsForeignOrMalformedFiles) {
  TempDir dir("tok_bad");
  std::ofstream(dir.path() / "tokenizer.json") << R"({"model": {"type": "WordPiece"}})";
  try {
    Tokenizer::load(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.json"));
    EXPECT_THAT(e.what(), HasSubstr("'WordPiece' is not supported"));
  }
  // A BPE tokenizer.json without its vocabulary names the missing field.
  std::ofstream(dir.path() / "tokenizer.json") << R"({"model": {"type": "BPE"}})";
  try {
    Tokenizer::load(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.json: field 'model.vocab' is missing"));
  }
  std::ofstream(dir.path() / "tokenizer.json") << "{";
  EXPECT_THROW(Tokenizer::load(dir.path()), Error);
  std::ofstream(dir.path() / "tokenizer.json")
      << R"({"model": {"type": "HeadwayByte"}, "added_tokens": [{"id": 7, "content": "<s>"}]})";
  EXPECT_THROW(Tokenizer::load(dir.path()), Error);
  std::filesystem::remove(dir.path() / "tokenizer.json");
  EXPECT_THROW(Tokenizer::load(dir.path()), Error);
}

// From helper-151's fuzzer: offsets and ids were narrowed to 32 bits without a word (vocab_size
// 2^40 read as 0, an added id 2^32 + 5 as 5), overflowed (byte_offset 2147483600, id 2^31 - 1:
// UBSan), or were taken negative.
TEST(ByteTokenizer, RefusesIdsOutsideTheVocabularyNamingThem) {
  TempDir dir("tok_byte_range");
  const auto error = [&](const std::string& model, const std::string& rest) {
    std::ofstream(dir.path() / "tokenizer.json", std::ios::trunc)
        << R"({"model": {"type": "HeadwayByte")" << model << "}" << rest << "}";
    try {
      Tokenizer::load(dir.path());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  const std::string file = (dir.path() / "tokenizer.json").string();
  for (const char* offset : {"2147483600", "4294967303", "-1", "\"7\""}) {
    EXPECT_THAT(error(std::string(R"(, "byte_offset": )") + offset, ""),
                HasSubstr(file + ": model.byte_offset " + offset +
                          " is not an integer in [0, 2147483391]"));
  }
  for (const char* id : {"2147483647", "4294967301", "-7"}) {
    EXPECT_THAT(
        error("", std::string(R"(, "added_tokens": [{"id": )") + id + R"(, "content": "<s>"}])"),
        HasSubstr(file + ": added token id " + id + " is not an integer in [0, 2147483646]"));
  }
  EXPECT_THAT(error("", R"(, "vocab_size": 1099511627776)"),
              HasSubstr(file + ": vocab_size 1099511627776 is not an integer in [1, 2147483647]"));
  EXPECT_THAT(error("", R"(, "vocab_size": 200)"),
              HasSubstr(file + ": vocab_size 200 does not cover token 255"));
  EXPECT_THAT(
      error(R"(, "byte_offset": 2147483391)", R"(, "added_tokens": [{"id": 0, "content": "<s>"}])"),
      "loaded");
}

TEST(SentencePieceTokenizer, TrainsLoadsAndRoundTrips) {
  TempDir dir("tok_spm");
  const auto corpus = dir.path() / "corpus.txt";
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 300; ++i) {
      out << "the quick brown fox jumps over the lazy dog " << i << "\n"
          << "serving language models keeps short requests fast\n";
    }
  }
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + corpus.string() + " --model_prefix=" + (dir.path() / "tokenizer").string() +
      " --vocab_size=60 --model_type=bpe --minloglevel=2 --bos_id=1 --eos_id=2 --unk_id=0"
      " --control_symbols=[TOOL_CALLS]");
  ASSERT_TRUE(status.ok()) << status.ToString();
  const auto tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->vocab_size(), 60u);
  const std::string text = "the lazy fox keeps serving";
  const auto ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size());  // merges happened
  EXPECT_EQ(tok->decode(ids), text);
  std::vector<int32_t> with_specials = ids;
  with_specials.insert(with_specials.begin(), tok->bos());
  with_specials.push_back(tok->eos());
  with_specials.push_back(100000);
  EXPECT_EQ(tok->decode(with_specials), text);
  // Kept, control pieces are written as they are named, and the text after one keeps its leading
  // space, as Hugging Face's fast tokenizers decode it.
  EXPECT_EQ(tok->decode_with_special_tokens(with_specials), "<s> " + text + "</s>");
  int32_t tool_calls = -1;
  for (int32_t id = 0; id < 60; ++id) {
    const std::vector<int32_t> one = {id};
    if (tok->decode_with_special_tokens(one) == "[TOOL_CALLS]") tool_calls = id;
  }
  ASSERT_GE(tool_calls, 0) << "the control symbol is not in the model";
  EXPECT_EQ(tok->decode(std::vector<int32_t>{tool_calls}), "");
  std::vector<int32_t> call = {tool_calls};
  const std::vector<int32_t> lazy = tok->encode("lazy");
  call.insert(call.end(), lazy.begin(), lazy.end());
  EXPECT_EQ(tok->decode(call), "lazy");
  EXPECT_EQ(tok->decode_with_special_tokens(call), "[TOOL_CALLS] lazy");
  EXPECT_EQ(tok->decode_with_special_tokens(lazy), "lazy");  // nothing before: no space
}

TEST(SentencePieceTokenizer, CorruptModelIsAnErrorNamingTheFile) {
  TempDir dir("tok_spm_bad");
  std::ofstream(dir.path() / "tokenizer.model") << "not a protobuf";
  try {
    Tokenizer::load(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.model"));
  }
}

// From helper-151's fuzzer: a FIFO blocked the loader in open() for ever; so did a tokenizer.json
// one (read_json_file's).
TEST(SentencePieceTokenizer, AFileThatIsNotARegularOneIsNamedAsSuch) {
  TempDir dir("tok_fifo");
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const std::filesystem::path file = dir.path() / name;
    ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
    try {
      Tokenizer::load(dir.path());
      FAIL() << name;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(file.string() + ": cannot open: not a regular file"));
    }
  }
}

}  // namespace
}  // namespace headway::core
