// The guide's token masks: the ordered vocabulary walk (prefixes shared, refused prefixes skipped)
// and the per-place cache must allow exactly the tokens whose bytes the grammar takes, step after
// step; end tokens only where the output is complete.
#include "grammar_guide.h"

#include <gtest/gtest.h>
#include <headway/serving/service_error.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar_matcher.h"
#include "guided_output.h"
#include "json_schema.h"

namespace headway::serving::guided {
namespace {

constexpr int32_t kEos = 1;
constexpr int32_t kStop = 2;

// Every printable ASCII byte, a few multi-byte tokens that cross JSON's structure (and a
// grammar's raw text: "1," ends a number inside the token), two special
// tokens (no bytes), EOS and a stop token.
std::vector<std::string> test_vocabulary() {
  std::vector<std::string> tokens = {"", "", "", ""};  // 0 and 3: special; 1: EOS; 2: stop id
  for (int byte = 0x20; byte < 0x7F; ++byte) tokens.emplace_back(1, static_cast<char>(byte));
  for (const char* piece :
       {"{\"",  "\":",  "\": ", "\",",   "\", \"",   "name", "na",   "nam", "age",
        "tags", "true", "tr",   "null",  "nul",      "\"}",  "}}",   "]}",  "\"]",
        "[\"",  "12",   "3.5",  "-1",    "\xC3\xA9", "\xC3", "\xA9", "\n",  "{\n",
        "  ",   "e+",   "\\n",  "\\u00", "1,",       "2]",   "]]"}) {
    tokens.emplace_back(piece);
  }
  return tokens;
}

struct GuideFixture {
  // `keep_all`: every place's allowed set is kept (the cache path); else none is in this small
  // vocabulary (every walk is cheap).
  explicit GuideFixture(const std::string& schema, bool keep_all = false)
      : GuideFixture(std::make_shared<Grammar>(compile_json_schema(schema, "guided_json")),
                     keep_all) {}
  GuideFixture(std::shared_ptr<Grammar> compiled, bool keep_all)
      : grammar(std::move(compiled)),
        vocabulary(std::make_shared<VocabularyIndex>(test_vocabulary(), kEos)),
        guide(grammar, vocabulary, {kStop}, nullptr, keep_all ? 0 : GrammarGuide::kWorthKeeping),
        matcher(*grammar) {
    matcher.start(state);
  }

  // What a brute-force check allows from `state`: every token fed byte by byte.
  std::vector<bool> expected_allowed() {
    std::vector<bool> out(vocabulary->vocab_size(), false);
    for (uint32_t id = 0; id < vocabulary->vocab_size(); ++id) {
      const std::string_view bytes = vocabulary->bytes_of(static_cast<int32_t>(id));
      if (bytes.empty()) continue;
      MatchState at = state;
      MatchState next;
      bool alive = true;
      for (const char byte : bytes) {
        if (!matcher.advance(at, static_cast<uint8_t>(byte), next)) {
          alive = false;
          break;
        }
        std::swap(at, next);
      }
      out[id] = alive;
    }
    const bool complete = matcher.complete(state);
    out[kEos] = complete;
    out[kStop] = complete;
    return out;
  }

  void advance_reference(int32_t token) {
    MatchState next;
    for (const char byte : vocabulary->bytes_of(token)) {
      ASSERT_TRUE(matcher.advance(state, static_cast<uint8_t>(byte), next));
      std::swap(state, next);
    }
  }

  std::shared_ptr<Grammar> grammar;
  std::shared_ptr<VocabularyIndex> vocabulary;
  GrammarGuide guide;
  GrammarMatcher matcher;
  MatchState state;
};

const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 6},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": ["boolean", "null"]}, "maxItems": 3}},
  "required": ["name", "age"]})";

// Random answers of `grammar` (40 runs, half through the kept sets), each mask checked against
// the brute-force one at every step; the answers that ended.
std::vector<std::string> answers_checked_step_by_step(const std::shared_ptr<Grammar>& grammar,
                                                      uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<std::string> answers;
  for (int run = 0; run < 40; ++run) {
    GuideFixture f(grammar, /*keep_all=*/run % 2 == 0);
    std::string text;
    for (int step = 0; step < 80 && !f.guide.ended(); ++step) {
      const std::vector<bool> expected = f.expected_allowed();
      std::vector<float> logits(f.vocabulary->vocab_size() + 5, 0.0f);  // 5 padded rows
      f.guide.mask(logits);
      std::vector<int32_t> allowed;
      for (uint32_t id = 0; id < logits.size(); ++id) {
        const bool kept = std::isfinite(logits[id]);
        const bool want = id < expected.size() && expected[id];
        if (kept != want) {
          ADD_FAILURE() << "token " << id << " after '" << text << "'";
          return answers;
        }
        if (kept) allowed.push_back(static_cast<int32_t>(id));
      }
      if (allowed.empty()) {
        ADD_FAILURE() << "nothing allowed after '" << text << "'";
        return answers;
      }
      // Prefer the end once complete, so that runs finish.
      int32_t token = allowed[random() % allowed.size()];
      if (f.guide.complete() && random() % 2 == 0) token = kEos;
      EXPECT_TRUE(f.guide.accept(token)) << token;
      if (token == kEos) break;
      f.advance_reference(token);
      text += f.vocabulary->bytes_of(token);
    }
    if (f.guide.ended()) answers.push_back(text);
  }
  return answers;
}

TEST(GrammarGuide, MasksAllowExactlyWhatTheGrammarTakesAtEveryStep) {
  const auto grammar = std::make_shared<Grammar>(compile_json_schema(kSchema, "guided_json"));
  const std::vector<std::string> answers = answers_checked_step_by_step(grammar, 11);
  EXPECT_GT(answers.size(), 10u);
  for (const std::string& text : answers) {
    const nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << text;
    EXPECT_TRUE(value.contains("name") && value.contains("age")) << text;
  }
}

// The same under patterns (a string's characters, a whole raw answer): the automaton's states
// are places like any other.
TEST(GrammarGuide, MasksFollowPatternsAtEveryStep) {
  const auto schema = std::make_shared<Grammar>(compile_json_schema(
      R"({"type": "object", "properties": {"name": {"type": "string", "pattern": "^n[a-z]*e$",
          "maxLength": 8}, "age": {"type": "string", "format": "date"}}, "required": ["name"]})",
      "guided_json"));
  std::vector<std::string> answers = answers_checked_step_by_step(schema, 3);
  EXPECT_GT(answers.size(), 10u);
  for (const std::string& text : answers) {
    const nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(value.is_object()) << text;
    const std::string name = value["name"].get<std::string>();
    EXPECT_TRUE(name.size() >= 2 && name.size() <= 8 && name.front() == 'n' && name.back() == 'e')
        << text;
  }
  const auto regex = std::make_shared<Grammar>(
      regex_grammar("(true|null|nam(e|es)|-?[0-9]{1,3}(\\.5)?)( tags)?", "guided_regex"));
  answers = answers_checked_step_by_step(regex, 5);
  EXPECT_GT(answers.size(), 10u);
  const std::regex whole("(true|null|nam(e|es)|-?[0-9]{1,3}(\\.5)?)( tags)?");
  for (const std::string& text : answers) EXPECT_TRUE(std::regex_match(text, whole)) << text;
}

// Whether `value` is what kNestedLists allows: arrays of arrays, null and small nonzero integers.
bool nested_list(const nlohmann::json& value) {
  if (value.is_null()) return true;
  if (value.is_number_integer()) {
    const int64_t n = value.get<int64_t>();
    return n != 0 && n > -1000 && n < 1000;
  }
  if (!value.is_array()) return false;
  return std::all_of(value.begin(), value.end(), nested_list);
}

// A recursive grammar (ebnf_syntax.h): its places are parse stacks with forks, and raw text
// inside it may end at any match, so the automaton walk is not taken there.
TEST(GrammarGuide, MasksFollowAGrammarAtEveryStep) {
  const auto grammar = std::make_shared<Grammar>(ebnf_grammar(R"g(root ::= list
      list ::= "[" (item ("," " "? item)*)? "]"
      item ::= list | num | "null"
      num ::= "-"? [1-9] [0-9]{0,2})g",
                                                              "guided_grammar"));
  const std::vector<std::string> answers = answers_checked_step_by_step(grammar, 17);
  EXPECT_GT(answers.size(), 10u);
  for (const std::string& text : answers) {
    const nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << text;
    EXPECT_TRUE(value.is_array() && nested_list(value)) << text;
  }
}

TEST(GrammarGuide, RefusedTokensLeaveTheGuideWhereItWas) {
  GuideFixture f(kSchema);
  const auto token_of = [&](std::string_view bytes) {
    for (uint32_t id = 0; id < f.vocabulary->vocab_size(); ++id) {
      if (f.vocabulary->bytes_of(static_cast<int32_t>(id)) == bytes) {
        return static_cast<int32_t>(id);
      }
    }
    ADD_FAILURE() << "no token " << bytes;
    return -1;
  };
  EXPECT_FALSE(f.guide.accept(kEos));             // nothing complete yet
  EXPECT_FALSE(f.guide.accept(token_of("{\n")));  // no newline after '{'
  EXPECT_FALSE(f.guide.accept(0));                // a special token has no bytes
  EXPECT_TRUE(f.guide.accept(token_of("{\"")));
  EXPECT_FALSE(f.guide.accept(token_of("age")));  // name comes first
  EXPECT_TRUE(f.guide.accept(token_of("nam")));
  EXPECT_TRUE(f.guide.allows(token_of("e")));
  EXPECT_FALSE(f.guide.allows(token_of("name")));
  for (const char* piece :
       {"e", "\": ", "\"", "\xC3", "\xA9", "\",", "\"", "age", "\":", "-1", "}"}) {
    ASSERT_TRUE(f.guide.accept(token_of(piece))) << piece;
  }
  EXPECT_TRUE(f.guide.complete());
  EXPECT_FALSE(f.guide.ended());
  EXPECT_FALSE(f.guide.accept(token_of("}")));
  EXPECT_TRUE(f.guide.allows(kStop));
  EXPECT_TRUE(f.guide.accept(kStop));
  EXPECT_TRUE(f.guide.ended());
  EXPECT_FALSE(f.guide.accept(kEos));
}

// A stop token id whose text would fit is still an end: allowed only where the output is complete.
TEST(GrammarGuide, StopTokensWithTextComeOnlyAtTheEnd) {
  auto grammar = std::make_shared<Grammar>(compile_json_schema(
      R"({"type": "object", "properties": {"a": {"type": "object"}}})", "guided_json"));
  auto vocabulary = std::make_shared<VocabularyIndex>(
      std::vector<std::string>{"", "{\"a\":{", "}", "}}"}, /*eos=*/0);
  GrammarGuide guide(grammar, vocabulary, {2});
  ASSERT_TRUE(guide.accept(1));
  EXPECT_FALSE(guide.allows(2));  // "}" fits, but it would end the output inside the object
  EXPECT_FALSE(guide.accept(2));
  EXPECT_TRUE(guide.allows(3));
  ASSERT_TRUE(guide.accept(3));
  EXPECT_TRUE(guide.allows(2));
  EXPECT_TRUE(guide.accept(2));
  EXPECT_TRUE(guide.ended());
}

// Guides of one grammar share its store: a place one walked is a lookup for the other, and each
// still adds only its own end tokens.
TEST(GrammarGuide, GuidesOfOneGrammarShareKeptSetsButNotEndTokens) {
  auto grammar = std::make_shared<Grammar>(compile_json_schema(
      R"({"type": "object", "properties": {"a": {"type": "integer"}}})", "guided_json"));
  auto vocabulary = std::make_shared<VocabularyIndex>(
      std::vector<std::string>{"", "{\"a\":", "1", "}", "x"}, /*eos=*/0);
  auto store = std::make_shared<MaskStore>(8);
  GrammarGuide first(grammar, vocabulary, {3}, store, /*worth_keeping=*/0);
  GrammarGuide second(grammar, vocabulary, {}, store, /*worth_keeping=*/0);
  for (GrammarGuide* guide : {&first, &second}) {
    ASSERT_TRUE(guide->accept(1));
    ASSERT_TRUE(guide->accept(2));
  }
  EXPECT_FALSE(first.allows(3));  // its stop id: "}" fits, but the output is not complete
  EXPECT_EQ(store->size(), 0u);   // (an end token needs no walk)
  EXPECT_TRUE(second.allows(3));  // an ordinary token for the other request
  EXPECT_EQ(store->size(), 1u);
  std::vector<float> logits(5, 1.0f);
  first.mask(logits);
  EXPECT_EQ(store->size(), 1u);  // the same place: looked up, not walked again
  EXPECT_TRUE(std::isinf(logits[3]));
  EXPECT_EQ(logits[2], 1.0f);
  ASSERT_TRUE(second.accept(3));
  EXPECT_TRUE(second.complete());
  std::vector<float> end(5, 1.0f);
  second.mask(end);
  EXPECT_EQ(end[0], 1.0f);  // EOS keeps its own logit where the output is complete
  for (int id = 1; id < 5; ++id) EXPECT_TRUE(std::isinf(end[id])) << id;
}

TEST(GuideFactory, RequestsForTheSameOutputShareOneGrammar) {
  GuideFactory factory(std::make_shared<VocabularyIndex>(test_vocabulary(), kEos));
  GuidedOutput schema;
  schema.kind = GuidedOutput::Kind::kJsonSchema;
  schema.schema_json = kSchema;
  auto first = factory.make(schema, {});
  auto second = factory.make(schema, {kStop});
  EXPECT_NE(first, second);  // one guide per request
  EXPECT_EQ(factory.grammars(), 1u);
  GuidedOutput choice;
  choice.kind = GuidedOutput::Kind::kChoice;
  for (int i = 0; i < 20; ++i) {
    choice.choices = {"c" + std::to_string(i)};
    ASSERT_NE(factory.make(choice, {}), nullptr);
  }
  EXPECT_EQ(factory.grammars(), GuideFactory::kGrammars);  // the most recent only
  // A refused schema is refused each time, and kept nowhere.
  schema.schema_json = R"({"type": "array", "uniqueItems": true})";
  schema.field = "guided_json";
  EXPECT_THROW(factory.make(schema, {}), ServiceError);
  EXPECT_THROW(factory.make(schema, {}), ServiceError);
  EXPECT_EQ(factory.grammars(), GuideFactory::kGrammars);
  EXPECT_EQ(factory.make(GuidedOutput{}, {}), nullptr);
}

// Where the only tokens whose text fits are stop ids (which would end the output unfinished),
// the end-of-sequence token is left, as where nothing fits.
// starts_after: before "</think>" anything but an end token may come (and no token that would
// close the thinking with bytes the shape refuses); after it a few blanks, then the shape.
TEST(GrammarGuide, AReasoningModelThinksBeforeTheShape) {
  auto grammar = std::make_shared<Grammar>(choice_grammar({"yes", "no"}, "guided_choice"));
  const std::vector<std::string> tokens = {
      "",   "hm",  "</", "think", ">",    "</think>\n\nyes", "</think>x",
      "\n", "yes", "no", "</th",  "ink>", "</think>yes"};
  auto vocabulary = std::make_shared<VocabularyIndex>(tokens, /*eos=*/0);
  const auto id = [&](const std::string& text) {
    return static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), text) - tokens.begin());
  };
  const auto thinking_guide = [&] {
    return GrammarGuide(grammar, vocabulary, {}, nullptr, GrammarGuide::kWorthKeeping, "</think>");
  };
  GrammarGuide guide = thinking_guide();
  std::vector<float> logits(tokens.size(), 1.0f);
  guide.mask(logits);
  EXPECT_TRUE(std::isinf(logits[0]));                // no end while thinking
  EXPECT_EQ(logits[id("hm")], 1.0f);                 // any text
  EXPECT_EQ(logits[id("</think>yes")], 1.0f);        // closes it and gives a whole answer
  EXPECT_TRUE(std::isinf(logits[id("</think>x")]));  // "x" cannot begin the answer
  // A choice (or a regular expression) is the answer as written: no blank before it, where a
  // JSON value may have some.
  EXPECT_TRUE(std::isinf(logits[id("</think>\n\nyes")]));
  EXPECT_FALSE(guide.allows(id("</think>x")));
  EXPECT_FALSE(guide.complete());
  ASSERT_TRUE(guide.accept(id("hm")));
  ASSERT_TRUE(guide.accept(id("</")));
  ASSERT_TRUE(guide.accept(id("think")));
  EXPECT_TRUE(guide.allows(id("hm")));   // still thinking: any text
  ASSERT_TRUE(guide.accept(id(">")));    // the marker closed across three tokens
  EXPECT_FALSE(guide.allows(id("hm")));  // now the shape
  EXPECT_FALSE(guide.allows(0));
  EXPECT_FALSE(guide.allows(id("\n")));
  ASSERT_TRUE(guide.accept(id("yes")));
  EXPECT_TRUE(guide.complete());
  EXPECT_TRUE(guide.accept(0));

  // Text between the parts of the marker is no marker.
  GrammarGuide interrupted = thinking_guide();
  ASSERT_TRUE(interrupted.accept(id("</th")));
  ASSERT_TRUE(interrupted.accept(id("hm")));
  ASSERT_TRUE(interrupted.accept(id("ink>")));
  EXPECT_TRUE(interrupted.allows(id("hm")));
  ASSERT_TRUE(interrupted.accept(id("</th")));
  ASSERT_TRUE(interrupted.accept(id("ink>")));
  EXPECT_FALSE(interrupted.allows(id("hm")));
  EXPECT_TRUE(interrupted.allows(id("no")));
}

// reasoning_opener (Qwen3): the first token either opens the thinking ("<think>", blanks before
// it allowed) or is the shape's own first token, and then the shape applies from there: an answer
// that does not think is shaped, not let run free until a "</think>" that never comes.
TEST(GrammarGuide, AnAnswerThatDoesNotOpenTheThinkingIsShapedFromItsFirstToken) {
  auto grammar = std::make_shared<Grammar>(choice_grammar({"yes", "no"}, "guided_choice"));
  const std::vector<std::string> tokens = {"",
                                           "<think>",
                                           "\n<think>",
                                           "hm",
                                           "yes",
                                           "no",
                                           "<thi",
                                           "</think>",
                                           "</think>yes",
                                           "<think></think>x",
                                           "<think></think>no"};
  auto vocabulary = std::make_shared<VocabularyIndex>(tokens, /*eos=*/0);
  const auto id = [&](const std::string& text) {
    return static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), text) - tokens.begin());
  };
  const auto qwen3_guide = [&] {
    return GrammarGuide(grammar, vocabulary, {}, nullptr, GrammarGuide::kWorthKeeping, "</think>",
                        "<think>");
  };
  GrammarGuide guide = qwen3_guide();
  std::vector<float> logits(tokens.size(), 1.0f);
  guide.mask(logits);
  EXPECT_EQ(logits[id("<think>")], 1.0f);    // opens the thinking
  EXPECT_EQ(logits[id("\n<think>")], 1.0f);  // after a blank, as the parser takes it
  EXPECT_EQ(logits[id("yes")], 1.0f);        // or the answer at once
  EXPECT_EQ(logits[id("no")], 1.0f);
  EXPECT_TRUE(std::isinf(logits[id("hm")]));    // neither: it would be unshaped content
  EXPECT_TRUE(std::isinf(logits[id("<thi")]));  // a part of the tag is neither either
  EXPECT_TRUE(std::isinf(logits[0]));           // no empty answer
  // One that opens and closes the thinking at once is held to the shape after it, as any token
  // closing it.
  EXPECT_EQ(logits[id("<think></think>no")], 1.0f);
  EXPECT_TRUE(std::isinf(logits[id("<think></think>x")]));
  EXPECT_FALSE(guide.allows(id("<think></think>x")));
  EXPECT_TRUE(guide.allows(id("<think>")));
  EXPECT_FALSE(guide.allows(id("hm")));
  // A refused token leaves the guide where it was: the first token still decides.
  EXPECT_FALSE(guide.accept(id("hm")));
  EXPECT_FALSE(guide.accept(0));
  EXPECT_FALSE(guide.accept(id("<think></think>x")));
  EXPECT_TRUE(guide.allows(id("<think>")));
  EXPECT_TRUE(guide.allows(id("yes")));
  ASSERT_TRUE(guide.accept(id("no")));
  EXPECT_TRUE(guide.complete());
  EXPECT_FALSE(guide.allows(id("<think>")));  // the first token decided: no thinking now
  EXPECT_TRUE(guide.accept(0));

  GrammarGuide thinking = qwen3_guide();
  ASSERT_TRUE(thinking.accept(id("\n<think>")));
  EXPECT_TRUE(thinking.allows(id("hm")));  // thinking: any text
  EXPECT_FALSE(thinking.allows(0));
  ASSERT_TRUE(thinking.accept(id("hm")));
  EXPECT_FALSE(thinking.complete());
  ASSERT_TRUE(thinking.accept(id("</think>yes")));
  EXPECT_TRUE(thinking.complete());

  // Without the opener (DeepSeek-R1), the thinking is open from the start: any text comes first.
  GrammarGuide r1(grammar, vocabulary, {}, nullptr, GrammarGuide::kWorthKeeping, "</think>");
  EXPECT_TRUE(r1.allows(id("hm")));
}

// The tokens that open and close the thinking are the vocabulary's lists, found once for every
// guide of a reasoning model (made by the factory or not); a request's stop id stays an end for
// it alone, even where it opens the thinking.
TEST(GrammarGuide, ReasoningGuidesShareTheVocabularysTokenListsButNotEndTokens) {
  auto grammar = std::make_shared<Grammar>(choice_grammar({"yes", "no"}, "guided_choice"));
  const std::vector<std::string> tokens = {"",    "<think>", "\n<think>",  "hm",
                                           "yes", "no",      "</think>yes"};
  auto vocabulary = std::make_shared<VocabularyIndex>(tokens, /*eos=*/0);
  constexpr int32_t kOpens = 1;
  constexpr int32_t kOpensAfterBlank = 2;
  GuideFactory factory(vocabulary);
  GuidedOutput choice;
  choice.kind = GuidedOutput::Kind::kChoice;
  choice.choices = {"yes", "no"};
  choice.starts_after = "</think>";
  choice.reasoning_opener = "<think>";
  std::vector<std::shared_ptr<core::TokenGuide>> guides;
  for (int i = 0; i < 3; ++i)
    guides.push_back(factory.make(choice, i == 1 ? std::vector{kOpens} : std::vector<int32_t>{}));
  guides.push_back(std::make_shared<GrammarGuide>(grammar, vocabulary, std::vector<int32_t>{},
                                                  nullptr, GrammarGuide::kWorthKeeping, "</think>",
                                                  "<think>"));
  for (const auto& guide : guides) {
    std::vector<float> logits(tokens.size(), 1.0f);
    guide->mask(logits);
  }
  EXPECT_EQ(vocabulary->token_list_scans(), 2u);  // one list each, for four guides
  EXPECT_EQ(*vocabulary->tokens_opening("<think>"),
            (std::vector<int32_t>{kOpens, kOpensAfterBlank}));

  // guides[1] stops at "<think>": for it that token is an end, not the thinking's start.
  for (size_t g = 0; g < guides.size(); ++g) {
    std::vector<float> logits(tokens.size(), 1.0f);
    guides[g]->mask(logits);
    EXPECT_EQ(logits[kOpensAfterBlank], 1.0f) << g;
    if (g == 1) {
      EXPECT_TRUE(std::isinf(logits[kOpens]));
    } else {
      EXPECT_EQ(logits[kOpens], 1.0f) << g;
    }
  }
  EXPECT_FALSE(guides[1]->accept(kOpens));  // an end, where the output is not complete
  EXPECT_TRUE(guides[0]->accept(kOpens));
  // Thinking, the closing token's check uses the shared list too.
  std::vector<float> thinking(tokens.size(), 1.0f);
  guides[0]->mask(thinking);
  EXPECT_EQ(thinking[6], 1.0f);
  EXPECT_TRUE(std::isinf(thinking[0]));
  EXPECT_EQ(vocabulary->token_list_scans(), 2u);
}

TEST(GrammarGuide, WhereOnlyStopTokensFitTheEndIsLeft) {
  auto grammar = std::make_shared<Grammar>(choice_grammar({"a"}, "guided_choice"));
  auto vocabulary =
      std::make_shared<VocabularyIndex>(std::vector<std::string>{"", "a", "b"}, /*eos=*/0);
  GrammarGuide guide(grammar, vocabulary, {1});
  std::vector<float> logits(3, 1.0f);
  guide.mask(logits);
  EXPECT_EQ(logits[0], 0.0f);
  EXPECT_TRUE(std::isinf(logits[1]));
  EXPECT_TRUE(std::isinf(logits[2]));
}

TEST(GrammarGuide, WhereNoTokenFitsOnlyTheEndIsLeft) {
  // The vocabulary has no 'z', and the only value is the string "z".
  auto grammar =
      std::make_shared<Grammar>(compile_json_schema(R"({"const": "zz"})", "guided_json"));
  auto vocabulary =
      std::make_shared<VocabularyIndex>(std::vector<std::string>{"", "\"", "a", "b"}, /*eos=*/0);
  GrammarGuide guide(grammar, vocabulary, {});
  ASSERT_TRUE(guide.accept(1));
  std::vector<float> logits(4, 1.0f);
  guide.mask(logits);
  EXPECT_EQ(logits[0], 0.0f);
  for (int id = 1; id < 4; ++id) EXPECT_TRUE(std::isinf(logits[id])) << id;
}

}  // namespace
}  // namespace headway::serving::guided
