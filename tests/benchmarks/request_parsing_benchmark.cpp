// Cost of reading an OpenAI chat request body of N messages (parse, depth check and field checks),
// per message: it should not grow with N. An earlier depth check (nlohmann's parse callback)
// rescanned the messages array at every message's end, so 100,000 messages took 80 s; see
// docs/performance.md, "Request parsing".
#include <benchmark/benchmark.h>

#include <string>

#include "openai_request.h"

namespace {

std::string chat_body(int64_t messages) {
  std::string body = R"({"model": "tiny", "max_tokens": 2, "messages": [)";
  for (int64_t i = 0; i < messages; ++i) {
    if (i > 0) body += ", ";
    body += R"({"role": "user", "content": "hi there"})";
  }
  return body + "]}";
}

void BM_ParseChatRequest(benchmark::State& state) {
  const std::string body = chat_body(state.range(0));
  for (auto _ : state) {
    auto request = headway::serving::http::parse_chat_request(body);
    benchmark::DoNotOptimize(request);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // items: messages
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_ParseChatRequest)
    ->RangeMultiplier(10)
    ->Range(100, 100000)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
