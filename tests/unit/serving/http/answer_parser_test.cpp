// ReasoningParser (deepseek_r1, qwen3) and AnswerParser (reasoning, then tool calls in the rest):
// what they split out of whole answers, and that a stream cut anywhere gives the same.
#include "answer_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace headway::serving::http {
namespace {

struct Split {
  std::string reasoning;
  std::string content;
  bool operator==(const Split&) const = default;
};

// `prompt`: where the request's prompt left the thinking.
Split split_pieces(ReasoningFormat format, const std::vector<std::string>& pieces,
                   PromptReasoning prompt = PromptReasoning::kNone) {
  ReasoningParser parser(format);
  parser.follow_prompt(prompt);
  Split out;
  for (const std::string& piece : pieces) parser.feed(piece, out.reasoning, out.content);
  parser.finish(out.reasoning, out.content);
  return out;
}

Split split_whole(ReasoningFormat format, const std::string& text,
                  PromptReasoning prompt = PromptReasoning::kNone) {
  return split_pieces(format, {text}, prompt);
}

// Every cut into two pieces, and random cuts, give what the whole answer gives.
void expect_cut_invariant(ReasoningFormat format, const std::string& text,
                          PromptReasoning prompt = PromptReasoning::kNone) {
  const Split whole = split_whole(format, text, prompt);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(split_pieces(format, {text.substr(0, cut), text.substr(cut)}, prompt), whole)
        << "cut at " << cut << " of " << text;
  }
  std::mt19937 random(11);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t length = std::uniform_int_distribution<size_t>(0, 5)(random);
      pieces.push_back(text.substr(at, length));
      at += length;
    }
    EXPECT_EQ(split_pieces(format, pieces, prompt), whole) << "trial " << trial << " of " << text;
  }
}

TEST(ReasoningParser, FormatsAreNamedAsVllmNamesThem) {
  EXPECT_EQ(reasoning_format_named("deepseek_r1"), ReasoningFormat::kDeepSeekR1);
  EXPECT_EQ(reasoning_format_named("qwen3"), ReasoningFormat::kQwen3);
  EXPECT_EQ(reasoning_format_named("granite"), std::nullopt);
}

TEST(ReasoningParser, ThinkingBetweenTheTagsIsReasoning) {
  const std::string text = "\n<think>\nFirst, 2+2 is 4.\n</think>\n\nThe answer is 4.";
  for (const ReasoningFormat format : {ReasoningFormat::kDeepSeekR1, ReasoningFormat::kQwen3}) {
    EXPECT_EQ(split_whole(format, text), (Split{"\nFirst, 2+2 is 4.\n", "\n\nThe answer is 4."}));
    expect_cut_invariant(format, text);
  }
}

TEST(ReasoningParser, WithoutTheOpeningTag) {
  // R1's template opens the thinking in the prompt: what comes before </think> is reasoning.
  const std::string r1 = "Hmm, 4.</think>It is 4.";
  EXPECT_EQ(split_whole(ReasoningFormat::kDeepSeekR1, r1), (Split{"Hmm, 4.", "It is 4."}));
  expect_cut_invariant(ReasoningFormat::kDeepSeekR1, r1);
  // Qwen3 without "<think>" is not thinking (enable_thinking off): all content, tags and all.
  EXPECT_EQ(split_whole(ReasoningFormat::kQwen3, r1), (Split{"", r1}));
  expect_cut_invariant(ReasoningFormat::kQwen3, r1);
  expect_cut_invariant(ReasoningFormat::kQwen3, "  <thin> is not the tag");
}

TEST(ReasoningParser, APromptThatOpenedTheThinkingMakesATaglessAnswerReasoning) {
  // Qwen3-Thinking-2507's template ends the prompt with "<think>\n": the answer starts inside the
  // thinking, and its "</think>" (not the client's business) ends it, in both formats.
  const std::string answer = "Hmm, 4.\n</think>\n\nIt is 4.";
  for (const ReasoningFormat format : {ReasoningFormat::kDeepSeekR1, ReasoningFormat::kQwen3}) {
    EXPECT_EQ(split_whole(format, answer, PromptReasoning::kOpen),
              (Split{"Hmm, 4.\n", "\n\nIt is 4."}));
    expect_cut_invariant(format, answer, PromptReasoning::kOpen);
    // Cut short by max_tokens: still thinking.
    EXPECT_EQ(split_whole(format, "Hmm, 4", PromptReasoning::kOpen), (Split{"Hmm, 4", ""}));
    // The tag written again anyway is dropped as at the start of any answer.
    EXPECT_EQ(split_whole(format, "<think>Hmm.</think>4", PromptReasoning::kOpen),
              (Split{"Hmm.", "4"}));
  }
}

TEST(ReasoningParser, APromptThatClosedTheThinkingMakesATaglessAnswerContent) {
  // Qwen3's template with enable_thinking off ends the prompt with "<think>\n\n</think>\n\n":
  // no thinking comes, even under deepseek_r1 (which otherwise takes a tagless answer for all
  // reasoning, and would leave the content empty).
  for (const ReasoningFormat format : {ReasoningFormat::kDeepSeekR1, ReasoningFormat::kQwen3}) {
    EXPECT_EQ(split_whole(format, "It is 4.", PromptReasoning::kEnded), (Split{"", "It is 4."}));
    expect_cut_invariant(format, "It is 4.", PromptReasoning::kEnded);
  }
}

TEST(ReasoningParser, AnAnswerThatNeverClosesItsThinkingIsAllReasoning) {
  // max_tokens ended it mid-thought: streamed, that text already went out as reasoning.
  const std::string text = "<think>Let me see, 2 and 2 make </th";
  for (const ReasoningFormat format : {ReasoningFormat::kDeepSeekR1, ReasoningFormat::kQwen3}) {
    EXPECT_EQ(split_whole(format, text), (Split{"Let me see, 2 and 2 make </th", ""}));
    expect_cut_invariant(format, text);
  }
  EXPECT_EQ(split_whole(ReasoningFormat::kDeepSeekR1, "just thinking"),
            (Split{"just thinking", ""}));
}

TEST(ReasoningParser, HoldsBackOnlyWhatMayBeATag) {
  ReasoningParser parser(ReasoningFormat::kQwen3);
  std::string reasoning;
  std::string content;
  parser.feed(" <thi", reasoning, content);
  EXPECT_EQ(reasoning + content, "");
  parser.feed("nk>a b </thi", reasoning, content);
  EXPECT_EQ(reasoning, "a b ");
  parser.feed("nk>c", reasoning, content);
  EXPECT_EQ(reasoning, "a b ");
  EXPECT_EQ(content, "c");
}

TEST(AnswerParser, CallsAreLookedForAfterTheThinkingOnly) {
  const std::string text =
      "<think>Maybe <tool_call>{\"name\": \"f\"}</tool_call>? No, g.</think>Calling g."
      "<tool_call>{\"name\": \"g\", \"arguments\": {\"x\": 1}}</tool_call>";
  AnswerParser parser(ReasoningParser(ReasoningFormat::kQwen3),
                      ToolCallParser(ToolCallFormat::kHermes));
  AnswerPieces whole;
  parser.feed(text, whole);
  parser.finish(whole);
  EXPECT_EQ(whole.reasoning, "Maybe <tool_call>{\"name\": \"f\"}</tool_call>? No, g.");
  EXPECT_EQ(whole.content, "Calling g.");
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].name, "g");
  EXPECT_TRUE(parser.called_tools());
  EXPECT_TRUE(parser.gives_reasoning());

  // A byte at a time, through a copy of a fresh parser (each choice copies the request's).
  const AnswerParser prototype(ReasoningParser(ReasoningFormat::kQwen3),
                               ToolCallParser(ToolCallFormat::kHermes));
  AnswerParser streamed = prototype;
  AnswerPieces pieces;
  for (const char c : text) streamed.feed(std::string_view(&c, 1), pieces);
  streamed.finish(pieces);
  EXPECT_EQ(pieces.reasoning, whole.reasoning);
  EXPECT_EQ(pieces.content, whole.content);
  ASSERT_EQ(pieces.calls.size(), 1u);
  EXPECT_EQ(pieces.calls[0].arguments, whole.calls[0].arguments);
}

TEST(AnswerParser, DroppedReasoningAndNoParsers) {
  AnswerParser dropping(ReasoningParser(ReasoningFormat::kDeepSeekR1), std::nullopt,
                        /*keep_reasoning=*/false);
  AnswerPieces pieces;
  dropping.feed("secret</think>shown", pieces);
  dropping.finish(pieces);
  EXPECT_EQ(pieces.reasoning, "");
  EXPECT_EQ(pieces.content, "shown");
  EXPECT_FALSE(dropping.gives_reasoning());
  EXPECT_FALSE(dropping.called_tools());

  AnswerParser plain(std::nullopt, std::nullopt);
  pieces.clear();
  plain.feed("<think>as is</think>", pieces);
  plain.finish(pieces);
  EXPECT_EQ(pieces.content, "<think>as is</think>");
}

}  // namespace
}  // namespace headway::serving::http
