// make_incremental_decoder: UTF-8 split across tokens, stop strings across tokens, invalid bytes,
// and a bounded amount of decoding per token. The byte tokenizer (one token per byte) gives exact
// control over where characters and stop strings are cut.
#include "headway/serving/text_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/byte_tokenizer.h>

#include <random>

#include "tiny_bpe.h"

namespace headway::serving {
namespace {

using ::testing::ElementsAre;

constexpr int32_t kBos = 256;
constexpr int32_t kEos = 257;
const core::ByteTokenizer kBytes(0, kBos, kEos, 300);
const std::string kReplacement = "\xEF\xBF\xBD";

std::vector<int32_t> ids_of(std::string_view text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

// Feeds `text` one byte-token at a time; returns what each append gave, then flush's output.
std::vector<std::string> feed(IncrementalDecoder& d, std::string_view text) {
  std::vector<std::string> out;
  for (int32_t id : ids_of(text)) out.push_back(d.append(std::span(&id, 1)));
  out.push_back(d.flush());
  return out;
}

bool valid_utf8(std::string_view s) {
  // Independent of the code under test: decode with the standard's ranges.
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (size_t k = 2; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

TEST(TextDecoder, HoldsMultiByteCharactersUntilComplete) {
  auto d = make_incremental_decoder(kBytes);
  // "é" (C3 A9), "€" (E2 82 AC), "🙂" (F0 9F 99 82), one byte per token.
  EXPECT_THAT(feed(*d, "aé€🙂z"),
              ElementsAre("a", "", "é", "", "", "€", "", "", "", "🙂", "z", ""));
}

TEST(TextDecoder, SeveralTokensAtOnceAndSpecialTokens) {
  auto d = make_incremental_decoder(kBytes);
  std::vector<int32_t> ids = {kBos, 'h', 'i', 0xE2, 0x82};
  EXPECT_EQ(d->append(ids), "hi");
  ids = {0xAC, kEos};
  EXPECT_EQ(d->append(ids), "€");
  EXPECT_EQ(d->flush(), "");
  EXPECT_FALSE(d->stopped());
}

// A stop token id ends the request: its id is the last one and gives no text (vLLM leaves it out
// too). The same id elsewhere, for a decoder without it as a stop, is text as usual.
TEST(TextDecoder, AStopTokenIdGivesNoText) {
  auto d = make_incremental_decoder(kBytes, {.stop_token_ids = {'Q', 'Z'}});
  std::vector<int32_t> ids = {'a', 'b'};
  EXPECT_EQ(d->append(ids), "ab");
  ids = {'c', 'Q'};
  EXPECT_EQ(d->append(ids), "c");
  EXPECT_EQ(d->flush(), "");
  auto alone = make_incremental_decoder(kBytes, {.stop_token_ids = {'Z'}});
  ids = {'Z'};
  EXPECT_EQ(alone->append(ids), "");
  auto plain = make_incremental_decoder(kBytes);
  ids = {'c', 'Q'};
  EXPECT_EQ(plain->append(ids), "cQ");
}

// skip_special_tokens: false writes special tokens as their text, except the stop token the
// request ends on; the end-of-sequence token ends it without a stop_reason (vLLM reports none).
TEST(TextDecoder, SpecialTokensAreWrittenWhenKeptButNotTheEndOfSequence) {
  const core::ByteTokenizer named(0, kBos, kEos, 300,
                                  {{kBos, "<s>"}, {kEos, "</s>"}, {258, "<x>"}});
  const std::vector<int32_t> ids = {kBos, 'h', 'i', 258, kEos};
  auto skipped = make_incremental_decoder(named, {.stop_token_ids = {kEos}});
  EXPECT_EQ(skipped->append(ids) + skipped->flush(), "hi");
  EXPECT_EQ(skipped->stop_reason(), StopReason(kEos));
  auto kept = make_incremental_decoder(
      named,
      {.stop_token_ids = {kEos, 'Z'}, .skip_special_tokens = false, .end_of_sequence = kEos});
  EXPECT_EQ(kept->append(ids) + kept->flush(), "<s>hi<x>");
  EXPECT_EQ(kept->stop_reason(), StopReason());
  auto other = make_incremental_decoder(
      named,
      {.stop_token_ids = {kEos, 'Z'}, .skip_special_tokens = false, .end_of_sequence = kEos});
  const std::vector<int32_t> ends_on_z = {kEos, 'Z'};  // an EOS that did not end the request
  EXPECT_EQ(other->append(ends_on_z), "</s>");
  EXPECT_EQ(other->stop_reason(), StopReason(int32_t{'Z'}));
}

TEST(TextDecoder, InvalidBytesBecomeReplacementCharacters) {
  auto d = make_incremental_decoder(kBytes);
  std::vector<int32_t> ids = {0xFF, 'a'};
  EXPECT_EQ(d->append(ids), kReplacement + "a");
  ids = {0xC3};  // a lead byte, then ASCII: it can never complete
  EXPECT_EQ(d->append(ids), "");
  ids = {'b'};
  EXPECT_EQ(d->append(ids), kReplacement + "b");
  ids = {0xE2, 0x82};  // truncated at the end of the stream
  EXPECT_EQ(d->append(ids), "");
  EXPECT_EQ(d->flush(), kReplacement);
}

TEST(TextDecoder, AStreamThatNeverCompletesIsNotHeldForever) {
  auto d = make_incremental_decoder(kBytes);
  std::vector<int32_t> lead = {0xF0};
  std::string out = d->append(lead);
  std::vector<int32_t> special = {kEos};
  for (int i = 0; i < 20; ++i) out += d->append(special);  // tokens that add no bytes
  EXPECT_EQ(out, kReplacement);
}

TEST(TextDecoder, RandomByteStreamsYieldValidUtf8AndValidTextVerbatim) {
  std::mt19937 rng(12345);
  const std::string alphabet[] = {"a", " ", "é", "€", "🙂", "日本", "\n"};
  for (int round = 0; round < 200; ++round) {
    // Valid text, cut into random chunks of byte tokens: comes back exactly.
    std::string text;
    for (int i = 0; i < 30; ++i) text += alphabet[rng() % std::size(alphabet)];
    std::vector<int32_t> ids = ids_of(text);
    auto d = make_incremental_decoder(kBytes);
    std::string out;
    for (size_t at = 0; at < ids.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 5, ids.size() - at);
      const std::string piece = d->append(std::span(ids).subspan(at, n));
      EXPECT_TRUE(valid_utf8(piece));
      out += piece;
      at += n;
    }
    out += d->flush();
    EXPECT_EQ(out, text);

    // Random bytes: whatever comes out is valid UTF-8.
    std::vector<int32_t> noise(40);
    for (int32_t& b : noise) b = static_cast<int32_t>(rng() % 256);
    auto n = make_incremental_decoder(kBytes);
    std::string garbage;
    for (int32_t b : noise) garbage += n->append(std::span(&b, 1));
    garbage += n->flush();
    EXPECT_TRUE(valid_utf8(garbage)) << round;
  }
}

// A truncated character is one U+FFFD (its maximal subpart, as Python's "replace" gives), whether
// the byte that cuts it comes in the same read or a later one.
TEST(TextDecoder, ATruncatedCharacterIsOneReplacementWhateverTheReads) {
  const std::vector<int32_t> ids = {0xF3, 0xA2, 0xCA, 'y', 0xE5, 0x97, 0xC4, 0xE0, 0x80, 0xAF};
  // Python: b"\xf3\xa2\xcay\xe5\x97\xc4\xe0\x80\xaf".decode("utf-8", "replace")
  const std::string expected = kReplacement + kReplacement + "y" + kReplacement + kReplacement +
                               kReplacement + kReplacement + kReplacement;
  auto whole = make_incremental_decoder(kBytes);
  EXPECT_EQ(whole->append(ids) + whole->flush(), expected);
  auto single = make_incremental_decoder(kBytes);
  std::string out;
  for (int32_t id : ids) out += single->append(std::span(&id, 1));
  EXPECT_EQ(out + single->flush(), expected);
}

// Random bytes among ids that decode to nothing (special tokens): the text, replacement
// characters included, is the same however many ids each read brings. Ids without bytes decide
// when a waiting character is given up, and that is counted per id, not per read.
TEST(TextDecoder, RandomBytesGiveTheSameTextWhateverTheReads) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20000; ++round) {
    std::vector<int32_t> ids(12);
    for (int32_t& id : ids) {
      const unsigned r = rng() % 10;
      id = r == 0  ? kEos
           : r < 4 ? static_cast<int32_t>(0x80 + rng() % 64)  // continuation bytes
           : r < 7 ? static_cast<int32_t>(0xC0 + rng() % 64)  // lead bytes, some invalid
                   : static_cast<int32_t>(rng() % 256);
    }
    auto single = make_incremental_decoder(kBytes);
    std::string one_at_a_time;
    for (int32_t id : ids) one_at_a_time += single->append(std::span(&id, 1));
    one_at_a_time += single->flush();
    ASSERT_TRUE(valid_utf8(one_at_a_time)) << round;
    auto chunked = make_incremental_decoder(kBytes);
    std::string in_reads;
    for (size_t at = 0; at < ids.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 6, ids.size() - at);
      in_reads += chunked->append(std::span(ids).subspan(at, n));
      at += n;
    }
    in_reads += chunked->flush();
    ASSERT_EQ(in_reads, one_at_a_time) << "round " << round;
  }
}

TEST(TextDecoder, StopStringSpanningTokensEndsTheText) {
  auto d = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}});
  EXPECT_THAT(feed(*d, "abSTOPcd"), ElementsAre("a", "b", "", "", "", "", "", "", ""));
  EXPECT_TRUE(d->stopped());
}

// vLLM's include_stop_str_in_output: the stop string's text ends the output, nothing after it.
TEST(TextDecoder, AKeptStopStringEndsTheTextWithIt) {
  auto d = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}, .keep_stop_string = true});
  EXPECT_THAT(feed(*d, "abSTOPcd"), ElementsAre("a", "b", "", "", "", "STOP", "", "", ""));
  EXPECT_TRUE(d->stopped());
  EXPECT_EQ(d->stop_reason(), StopReason(std::string("STOP")));
  auto same_chunk =
      make_incremental_decoder(kBytes, {.stop_strings = {"\n\nUser:"}, .keep_stop_string = true});
  std::vector<int32_t> ids = ids_of("Sure.\n\nUser: more");
  EXPECT_EQ(same_chunk->append(ids), "Sure.\n\nUser:");
}

// The ids that belong to the answer end with the one whose text completed the stop string, however
// many came in the read: the request's ids, logprobs and usage are cut there (RequestStream).
TEST(TextDecoder, NamesTheIdThatCompletedTheStopString) {
  auto at_once = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}});
  EXPECT_EQ(at_once->ids_before_stop(), 0u);
  std::vector<int32_t> ids = ids_of("abSTOPcdSTOP");
  EXPECT_EQ(at_once->append(ids), "ab");
  EXPECT_EQ(at_once->ids_before_stop(), 6u);  // "abSTOP"
  auto in_reads = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}});
  ids = ids_of("abST");
  EXPECT_EQ(in_reads->append(ids), "ab");
  ids = ids_of("OPcd");
  EXPECT_EQ(in_reads->append(ids), "");
  EXPECT_EQ(in_reads->ids_before_stop(), 6u);
  // Within min_tokens a stop does not count; the one after it does. A multi-byte character's last
  // byte completes "é!" only with the "!" after it.
  auto late = make_incremental_decoder(kBytes, {.stop_strings = {"STOP", "é!"}, .min_tokens = 5});
  ids = ids_of("xSTOPcaé!zz");
  EXPECT_EQ(late->append(ids), "xSTOPca");
  EXPECT_EQ(late->ids_before_stop(), 10u);  // x S T O P c a \xC3 \xA9 !
  // Matched only when the held bytes are flushed at the end: every id was read.
  auto at_flush = make_incremental_decoder(kBytes, {.stop_strings = {"\xEF\xBF\xBD"}});
  ids = {'a', 0xE2, 0x82};
  EXPECT_EQ(at_flush->append(ids), "a");
  EXPECT_EQ(at_flush->flush(), "");
  EXPECT_EQ(at_flush->ids_before_stop(), 3u);
}

TEST(TextDecoder, HeldPrefixIsReleasedWhenItDoesNotBecomeAStop) {
  auto d = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}});
  EXPECT_THAT(feed(*d, "xSTAR"), ElementsAre("x", "", "", "STA", "R", ""));
  EXPECT_FALSE(d->stopped());
  // At the end of the stream the held tail is given out.
  auto e = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}});
  std::vector<int32_t> ids = ids_of("abST");
  EXPECT_EQ(e->append(ids), "ab");
  EXPECT_EQ(e->flush(), "ST");
}

TEST(TextDecoder, TextAfterTheStopInTheSameChunkIsDropped) {
  auto d = make_incremental_decoder(kBytes, {.stop_strings = {"\n\nUser:"}});
  std::vector<int32_t> ids = ids_of("Sure.\n\nUser: more");
  EXPECT_EQ(d->append(ids), "Sure.");
  EXPECT_TRUE(d->stopped());
  ids = ids_of("ignored");
  EXPECT_EQ(d->append(ids), "");
  EXPECT_EQ(d->flush(), "");
}

TEST(TextDecoder, EarliestOfSeveralStopStringsWins) {
  auto d = make_incremental_decoder(
      kBytes, {.stop_strings = {"cd", "bc", ""}});  // the empty one is ignored
  std::vector<int32_t> ids = ids_of("abcd");
  EXPECT_EQ(d->append(ids), "a");
  EXPECT_TRUE(d->stopped());
  EXPECT_EQ(d->stop_reason(), StopReason(std::string("bc")));  // the one that cut the text
}

// Of stops found in one chunk, the one a byte-at-a-time reader would complete first wins: "bc"
// ends before "abcd" does, though "abcd" starts first. So the result is the same whether the
// tokens came one read at a time or all in one.
TEST(TextDecoder, TheStopThatEndsFirstWinsWhateverTheChunks) {
  for (const bool kept : {false, true}) {
    auto at_once = make_incremental_decoder(
        kBytes, {.stop_strings = {"abcd", "bc"}, .keep_stop_string = kept});
    std::vector<int32_t> ids = ids_of("xabcdy");
    const std::string whole = at_once->append(ids) + at_once->flush();
    auto one_by_one = make_incremental_decoder(
        kBytes, {.stop_strings = {"abcd", "bc"}, .keep_stop_string = kept});
    std::string streamed;
    for (const std::string& piece : feed(*one_by_one, "xabcdy")) streamed += piece;
    EXPECT_EQ(whole, kept ? "xabc" : "xa");
    EXPECT_EQ(streamed, whole);
    EXPECT_EQ(at_once->stop_reason(), StopReason(std::string("bc")));
    EXPECT_EQ(one_by_one->stop_reason(), StopReason(std::string("bc")));
  }
}

TEST(TextDecoder, StopReasonNamesTheStopTokenIdOrNothing) {
  auto d = make_incremental_decoder(kBytes, {.stop_strings = {"zz"}, .stop_token_ids = {7, 9}});
  std::vector<int32_t> ids = ids_of("ab");
  EXPECT_EQ(d->append(ids), "ab");
  EXPECT_EQ(d->stop_reason(), StopReason());  // still running
  ids = {'c', 9};
  EXPECT_EQ(d->append(ids), "c");
  EXPECT_EQ(d->stop_reason(), StopReason(int32_t{9}));
  EXPECT_FALSE(d->stopped());  // a stop token ends the request upstream already
  // Ended by length (or EOS): no stop reason.
  auto e = make_incremental_decoder(kBytes, {.stop_strings = {"zz"}, .stop_token_ids = {7}});
  ids = ids_of("abc");
  e->append(ids);
  e->flush();
  EXPECT_EQ(e->stop_reason(), StopReason());
}

// vLLM's min_tokens: no stop counts that ends in the text of the first min_tokens ids, whether the
// ids come one at a time or in one chunk.
TEST(TextDecoder, StopsDoNotCountWithinMinTokens) {
  auto d = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}, .min_tokens = 6});
  EXPECT_THAT(feed(*d, "abSTOPcdSTOPe"),
              ElementsAre("a", "b", "", "", "", "STOP", "c", "d", "", "", "", "", "", ""));
  EXPECT_EQ(d->stop_reason(), StopReason(std::string("STOP")));
  auto chunk = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}, .min_tokens = 6});
  std::vector<int32_t> ids = ids_of("abSTOPcdSTOPe");
  EXPECT_EQ(chunk->append(ids), "abSTOPcd");
  EXPECT_TRUE(chunk->stopped());
  // A stop token id among the first min_tokens ids is text like any other and ends nothing.
  auto by_id = make_incremental_decoder(kBytes, {.stop_token_ids = {'x'}, .min_tokens = 3});
  ids = ids_of("axb");
  EXPECT_EQ(by_id->append(ids), "axb");
  EXPECT_EQ(by_id->stop_reason(), StopReason());
  ids = ids_of("cx");
  EXPECT_EQ(by_id->append(ids), "c");
  EXPECT_EQ(by_id->stop_reason(), StopReason(int32_t{'x'}));
}

// A stop string that begins in the text of the first min_tokens ids and ends after it counts, as
// in vLLM, whose check of the first id past min_tokens looks back len(stop) - 1 characters: its
// text is cut where the stop begins (or after it, kept), however the ids were read together.
TEST(TextDecoder, StopAcrossTheMinTokensBoundaryCounts) {
  for (const bool kept : {false, true}) {
    const DecodeOptions options{
        .stop_strings = {"STOP", "x"}, .keep_stop_string = kept, .min_tokens = 5};
    auto one_by_one = make_incremental_decoder(kBytes, options);
    std::string streamed;
    for (const std::string& piece : feed(*one_by_one, "xabSTOPcd")) streamed += piece;
    EXPECT_EQ(streamed, kept ? "xabSTOP" : "xab");
    EXPECT_EQ(one_by_one->stop_reason(), StopReason(std::string("STOP")));
    EXPECT_EQ(one_by_one->ids_before_stop(), 7u);
    for (const size_t split : {0, 3, 5, 6}) {  // "xabST|OPcd" and others
      auto d = make_incremental_decoder(kBytes, options);
      const std::vector<int32_t> ids = ids_of("xabSTOPcd");
      std::string text = d->append(std::span(ids).first(split));
      text += d->append(std::span(ids).subspan(split));
      text += d->flush();
      EXPECT_EQ(text, streamed) << split;
      EXPECT_EQ(d->ids_before_stop(), 7u) << split;
    }
  }
  // Ending with the last of the first min_tokens ids, it does not count.
  auto at_boundary = make_incremental_decoder(kBytes, {.stop_strings = {"STOP"}, .min_tokens = 6});
  std::vector<int32_t> ids = ids_of("abSTOPcd");
  EXPECT_EQ(at_boundary->append(ids), "abSTOPcd");
  EXPECT_EQ(at_boundary->flush(), "");
  EXPECT_EQ(at_boundary->stop_reason(), StopReason());
}

TEST(TextDecoder, StopStringWithMultiByteCharacters) {
  auto d = make_incremental_decoder(kBytes, {.stop_strings = {"é!"}});
  EXPECT_THAT(feed(*d, "caé!x"), ElementsAre("c", "a", "", "", "", "", ""));
  EXPECT_TRUE(d->stopped());
}

TEST(TextDecoder, StopMatchedOnlyAtFlushIsStillCut) {
  auto d = make_incremental_decoder(
      kBytes, {.stop_strings = {"\xE2\x82\xAC"}});  // "€", whose last byte is missing
  std::vector<int32_t> ids = {'a', 0xE2, 0x82};
  EXPECT_EQ(d->append(ids), "a");
  EXPECT_EQ(d->flush(), kReplacement);
  EXPECT_FALSE(d->stopped());
}

// Counts the ids a tokenizer is asked to decode: the decoder's work per token must stay bounded.
class CountingTokenizer final : public core::Tokenizer {
 public:
  explicit CountingTokenizer(const core::Tokenizer& inner) : inner_(inner) {}
  std::vector<int32_t> encode(std::string_view text) const override { return inner_.encode(text); }
  std::string decode(std::span<const int32_t> ids) const override {
    decoded_ += ids.size();
    return inner_.decode(ids);
  }
  std::string decode_with_special_tokens(std::span<const int32_t> ids) const override {
    decoded_ += ids.size();
    return inner_.decode_with_special_tokens(ids);
  }
  int32_t bos() const override { return inner_.bos(); }
  int32_t eos() const override { return inner_.eos(); }
  uint32_t vocab_size() const override { return inner_.vocab_size(); }
  std::string_view kind() const override { return inner_.kind(); }
  mutable size_t decoded_ = 0;

 private:
  const core::Tokenizer& inner_;
};

TEST(TextDecoder, DecodesABoundedWindowPerToken) {
  const CountingTokenizer counting(kBytes);
  auto d = make_incremental_decoder(counting, {.stop_strings = {"never appears"}});
  std::string text;
  for (int i = 0; i < 5000; ++i) text += i % 7 == 0 ? "é" : "x";
  std::string out;
  for (int32_t id : ids_of(text)) out += d->append(std::span(&id, 1));
  out += d->flush();
  EXPECT_EQ(out, text);
  // Each call decodes at most the context plus a few held tokens, twice: linear in the length.
  EXPECT_LT(counting.decoded_, 30 * text.size());
}

TEST(TextDecoder, WorksOverByteLevelBpe) {
  testing::TempDir dir("decoder_bpe");
  const std::string space = "\xC4\xA0";
  testing::write_tiny_bpe(dir.path(), {.merges = {{"\xC3\x83", "\xC2\xA9"}, {space, "c"}}});
  const auto tok = core::Tokenizer::load(dir.path());
  const std::string text = "<|begin_of_text|>café, cœur 🙂 STOP here";
  const auto ids = tok->encode(text);
  auto d = make_incremental_decoder(*tok, {.stop_strings = {" STOP"}});
  std::string out;
  for (int32_t id : ids) out += d->append(std::span(&id, 1));
  out += d->flush();
  EXPECT_EQ(out, "café, cœur 🙂");
  EXPECT_TRUE(d->stopped());
  // A special token's own text (logprobs name tokens by it) is its written form, as in vLLM: as
  // text it decodes to nothing, and two would share one key among completions' top_logprobs.
  EXPECT_EQ(d->token_bytes(testing::kEotId), "<|eot_id|>");
  EXPECT_EQ(d->token_bytes(testing::kBeginOfText), "<|begin_of_text|>");
  EXPECT_EQ(d->token_bytes('a'), "a");
}

// A tokenizer that decodes like SentencePiece drops the space that begins the first piece: primed
// with the prompt's last ids, the first output's text is the " Hi" it adds after them (vLLM's
// detokenizer primes its stream the same way); without them it is "Hi".
TEST(TextDecoder, APromptsLastIdsGiveTheFirstOutputItsLeadingSpace) {
  testing::TempDir dir("decoder_sentencepiece_bpe");
  testing::write_text(dir.path() / "tokenizer.json", testing::tiny_sentencepiece_bpe_json().dump());
  const auto tok = core::Tokenizer::load(dir.path());
  ASSERT_TRUE(tok->drops_first_space());
  const int32_t hi = 266;  // "▁Hi"
  const auto run = [&](std::vector<int32_t> context) {
    auto d = make_incremental_decoder(*tok, {.context = std::move(context)});
    std::string out = d->append(std::span(&hi, 1));
    out += d->append(std::span(&hi, 1));
    return out + d->flush();
  };
  EXPECT_EQ(run({1, hi}), " Hi Hi");
  EXPECT_EQ(run({1}), "Hi Hi");  // after <s> alone, as Hugging Face decodes <s> ▁Hi
  EXPECT_EQ(run({}), "Hi Hi");
  // Byte tokens decode to their bytes, so a window that starts or ends inside a character (a
  // prompt of CJK text spelled in <0xXX> tokens) still primes: the space is kept.
  EXPECT_EQ(run({3 + 0xA9, 3 + 0xC3}), " Hi Hi");
  // Ids without text (special tokens skipped) beyond the usual 5 of context: the window reaches
  // back to the last id with text, in a prompt and within the output.
  EXPECT_EQ(run({hi, 1, 1, 1, 1, 1, 1}), " Hi Hi");
  {
    auto d = make_incremental_decoder(*tok, {});
    std::string out;
    for (const int32_t id : {hi, 1, 1, 1, 1, 1, 1, 1, hi}) out += d->append(std::span(&id, 1));
    EXPECT_EQ(out + d->flush(), "Hi Hi");
  }
  // A token's own bytes (logprobs name tokens by them) keep its leading space too, a byte token
  // its byte: "▁Hi" is " Hi", <0x20> a space.
  const auto d = make_incremental_decoder(*tok, {});
  EXPECT_EQ(d->token_bytes(hi), " Hi");
  EXPECT_EQ(d->token_bytes(3 + 0x20), " ");
  EXPECT_EQ(d->token_bytes(260), "H");
}

}  // namespace
}  // namespace headway::serving
