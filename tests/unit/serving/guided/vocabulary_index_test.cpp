// The token lists the vocabulary keeps for reasoning models' guides: each must be what a scan of
// the whole vocabulary finds, kept once per (vocabulary, text) and shared, and bounded.
#include "vocabulary_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace headway::serving::guided {
namespace {

// Tokens made of the tags' characters, so that many begin, hold or end a tag; a few written out.
std::vector<std::string> tag_vocabulary() {
  std::vector<std::string> tokens = {
      "",      "<think>",   " \n<think>", "\t<thinking", "<thi",     "</think>", ">",     "k>",
      "ink>x", "x</think>", "</think>>",  "\r<think>",   "a<think>", "</th",     "think>"};
  std::mt19937 random(3);
  const std::string alphabet = "<>/think \n\tx";
  while (tokens.size() < 3000) {
    std::string token;
    const size_t length = random() % 10;
    for (size_t i = 0; i < length; ++i) token += alphabet[random() % alphabet.size()];
    tokens.push_back(token);
  }
  return tokens;
}

// What the lists must hold, found the plain way for each token.
std::vector<int32_t> scanned_opening(const std::vector<std::string>& tokens,
                                     const std::string& opener) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const size_t text = tokens[id].find_first_not_of(" \t\n\r");
    if (text != std::string::npos && tokens[id].compare(text, opener.size(), opener) == 0) {
      out.push_back(static_cast<int32_t>(id));
    }
  }
  return out;
}

// A token completes the marker where, after some part of the marker short of all of it (none
// included), the output holds the marker.
std::vector<int32_t> scanned_completing(const std::vector<std::string>& tokens,
                                        const std::string& marker) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < tokens.size(); ++id) {
    for (size_t begun = 0; begun < marker.size(); ++begun) {
      if ((marker.substr(0, begun) + tokens[id]).find(marker) != std::string::npos) {
        out.push_back(static_cast<int32_t>(id));
        break;
      }
    }
  }
  return out;
}

TEST(VocabularyIndex, TokenListsAreWhatAScanOfTheVocabularyFinds) {
  const std::vector<std::string> tokens = tag_vocabulary();
  const VocabularyIndex vocabulary(tokens, /*eos=*/1);  // an end token with text: listed too
  for (const std::string text : {"<think>", "</think>", ">", "<"}) {
    const std::vector<int32_t> opening = scanned_opening(tokens, text);
    const std::vector<int32_t> completing = scanned_completing(tokens, text);
    EXPECT_FALSE(opening.empty()) << text;
    EXPECT_FALSE(completing.empty()) << text;
    EXPECT_EQ(*vocabulary.tokens_opening(text), opening) << text;
    EXPECT_EQ(*vocabulary.tokens_completing(text), completing) << text;
  }
  EXPECT_EQ((*vocabulary.tokens_opening("<think>"))[0], 1);
  EXPECT_TRUE(vocabulary.tokens_opening("")->empty());
  EXPECT_TRUE(vocabulary.tokens_completing("")->empty());
}

TEST(VocabularyIndex, AListIsScannedOnceAndShared) {
  const VocabularyIndex vocabulary(tag_vocabulary(), /*eos=*/0);
  const VocabularyIndex::TokenList first = vocabulary.tokens_completing("</think>");
  EXPECT_EQ(vocabulary.tokens_completing("</think>"), first);  // the same list, not a copy
  EXPECT_EQ(vocabulary.token_list_scans(), 1u);
  // The same text for the other list is another list.
  EXPECT_NE(*vocabulary.tokens_opening("</think>"), *first);
  EXPECT_EQ(vocabulary.token_list_scans(), 2u);
  // Another vocabulary keeps its own.
  const VocabularyIndex other(std::vector<std::string>{"", "</think>"}, /*eos=*/0);
  EXPECT_EQ(*other.tokens_completing("</think>"), std::vector<int32_t>{1});
  EXPECT_EQ(vocabulary.tokens_completing("</think>"), first);
}

TEST(VocabularyIndex, KeptListsAreBounded) {
  const std::vector<std::string> tokens = tag_vocabulary();
  const VocabularyIndex vocabulary(tokens, /*eos=*/0);
  const VocabularyIndex::TokenList oldest = vocabulary.tokens_opening("<t");
  for (size_t i = 0; i < VocabularyIndex::kTokenListsKept + 3; ++i) {
    vocabulary.tokens_completing(std::string(i + 1, '>'));
  }
  EXPECT_EQ(vocabulary.token_lists_kept(), VocabularyIndex::kTokenListsKept);
  const size_t scans = vocabulary.token_list_scans();
  vocabulary.tokens_completing(std::string(VocabularyIndex::kTokenListsKept + 3, '>'));
  EXPECT_EQ(vocabulary.token_list_scans(), scans);  // the newest is kept
  // The oldest was let go, and is scanned again; a guide that held it still has it whole.
  EXPECT_EQ(*vocabulary.tokens_opening("<t"), *oldest);
  EXPECT_EQ(vocabulary.token_list_scans(), scans + 1);
  EXPECT_EQ(*oldest, scanned_opening(tokens, "<t"));
  EXPECT_EQ(vocabulary.token_lists_kept(), VocabularyIndex::kTokenListsKept);
}

// A list in use stays: the served model's "</think>", asked for by every request, is not pushed out
// by texts a gRPC client made up, however many.
TEST(VocabularyIndex, AListInUseIsNotLetGo) {
  const std::vector<std::string> tokens = tag_vocabulary();
  const VocabularyIndex vocabulary(tokens, /*eos=*/0);
  vocabulary.tokens_completing("</think>");
  for (size_t i = 0; i < 4 * VocabularyIndex::kTokenListsKept; ++i) {
    vocabulary.tokens_completing(std::string(i + 1, '>'));
    vocabulary.tokens_completing("</think>");  // a served request between any two others
  }
  const size_t scans = vocabulary.token_list_scans();
  vocabulary.tokens_completing("</think>");
  EXPECT_EQ(vocabulary.token_list_scans(), scans);
  EXPECT_EQ(scans, 1 + 4 * VocabularyIndex::kTokenListsKept);  // "</think>" scanned once
}

// Admitting threads and engine threads share one index: asked for at once, with lists coming and
// going (more texts than are kept), every answer is still the whole list.
TEST(VocabularyIndex, ListsMayBeAskedForFromManyThreads) {
  const std::vector<std::string> tokens = tag_vocabulary();
  const VocabularyIndex vocabulary(tokens, /*eos=*/0);
  const std::vector<std::string> texts = {"<think>", "</think>", ">", "<", "k>", "</",  "t",
                                          "th",      "<th",      "/", "n", "in", "ink>"};
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& text : texts) expected.push_back(scanned_completing(tokens, text));
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < wrong.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < 60; ++i) {
        const size_t k = (i * 7 + t * 3) % texts.size();
        if (*vocabulary.tokens_completing(texts[k]) != expected[k]) ++wrong[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t t = 0; t < wrong.size(); ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_LE(vocabulary.token_lists_kept(), VocabularyIndex::kTokenListsKept);
}

}  // namespace
}  // namespace headway::serving::guided
