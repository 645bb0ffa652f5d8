// Cost of parsing a chat answer as it streams, per generated token (4 bytes each), for answers of
// N bytes: it should not grow with N.
// - BM_StreamHermesCall: one hermes tool call whose JSON is N bytes long, fed a token at a time
//   (the parser holds the call until "</tool_call>" arrives).
// - BM_StreamReasoning: N bytes of thinking between <think> and </think>, then a short answer.
// - BM_WholeToolCallsRequest: parsing a chat request whose tools hold N properties in one
//   object, which keeps the client's key order (json_text.h).
// See docs/performance.md, "Answer parsing".
#include <benchmark/benchmark.h>

#include <string>
#include <string_view>

#include "answer_parser.h"
#include "openai_request.h"

namespace {

using headway::serving::http::AnswerParser;
using headway::serving::http::AnswerPieces;
using headway::serving::http::ReasoningFormat;
using headway::serving::http::ReasoningParser;
using headway::serving::http::ToolCallFormat;
using headway::serving::http::ToolCallParser;

constexpr size_t kTokenBytes = 4;

void stream(const AnswerParser& prototype, const std::string& answer, benchmark::State& state) {
  for (auto _ : state) {
    AnswerParser parser = prototype;
    AnswerPieces pieces;
    for (size_t at = 0; at < answer.size(); at += kTokenBytes) {
      parser.feed(std::string_view(answer).substr(at, kTokenBytes), pieces);
    }
    parser.finish(pieces);
    benchmark::DoNotOptimize(pieces);
  }
  state.SetItemsProcessed(state.iterations() *
                          static_cast<int64_t>(answer.size() / kTokenBytes));  // items: tokens
}

void BM_StreamHermesCall(benchmark::State& state) {
  std::string answer = R"(<tool_call>{"name": "write_file", "arguments": {"text": ")";
  answer += std::string(static_cast<size_t>(state.range(0)), 'x');
  answer += "\"}}</tool_call>";
  stream(AnswerParser(std::nullopt, ToolCallParser(ToolCallFormat::kHermes)), answer, state);
}
BENCHMARK(BM_StreamHermesCall)->RangeMultiplier(8)->Range(512, 32768);

void BM_StreamReasoning(benchmark::State& state) {
  std::string answer = "<think>";
  answer += std::string(static_cast<size_t>(state.range(0)), 'y');
  answer += "</think>The answer is 4.";
  stream(AnswerParser(ReasoningParser(ReasoningFormat::kQwen3),
                      ToolCallParser(ToolCallFormat::kHermes)),
         answer, state);
}
BENCHMARK(BM_StreamReasoning)->RangeMultiplier(8)->Range(512, 32768);

void BM_WholeToolCallsRequest(benchmark::State& state) {
  std::string properties;
  for (int64_t i = 0; i < state.range(0); ++i) {
    if (i > 0) properties += ", ";
    properties += "\"p" + std::to_string(i) + "\": {\"type\": \"string\"}";
  }
  const std::string body =
      R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", )"
      R"("function": {"name": "f", "parameters": {"type": "object", "properties": {)" +
      properties + "}}}}]}";
  for (auto _ : state) {
    auto request = headway::serving::http::parse_chat_request(body);
    benchmark::DoNotOptimize(request);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // items: properties
}
BENCHMARK(BM_WholeToolCallsRequest)->RangeMultiplier(8)->Range(64, 32768);

}  // namespace

BENCHMARK_MAIN();
