// Cost of reading an OpenAI chat request of N messages, per message: it should not grow with N.
// - BM_ParseChatRequest: the body (parse, depth check and field checks). An earlier depth check
//   (nlohmann's parse callback) rescanned the messages array at every message's end, so 100,000
//   messages took 80 s.
// - BM_RenderIndexingChatTemplate: a chat template that reads messages[loop.index0 - 1] in its
//   loop (a role-alternation check). Subscripts used to copy the list, so 20,000 messages took
//   36 s.
// - BM_EncodeChatTurns: the tokenizer over a rendered conversation of N turns (Llama 3's special
//   tokens around each message, byte-level BPE with Llama 3's pre-tokenizer pattern): each turn
//   is several segments between special tokens, each split by the pattern.
// See docs/performance.md, "Request parsing".
#include <benchmark/benchmark.h>
#include <headway/core/byte_tokenizer.h>
#include <headway/core/tokenizer.h>
#include <headway/serving/chat_template.h>

#include <string>
#include <vector>

#include "openai_request.h"
#include "tiny_bpe.h"

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
void BM_RenderIndexingChatTemplate(benchmark::State& state) {
  const headway::core::ByteTokenizer bytes(0, 256, 257, 300);
  const auto chat_template = headway::serving::ChatTemplate::from_string(
      "{% for message in messages %}{% if loop.index0 > 0 and messages[loop.index0 - 1]['role'] "
      "== message['role'] %}{{ raise_exception('roles must alternate') }}{% endif %}{{ "
      "message['role'] + ': ' + message['content'] + '\\n' }}{% endfor %}",
      "benchmark", bytes);
  std::vector<headway::serving::ChatMessage> messages;
  for (int64_t i = 0; i < state.range(0); ++i) {
    messages.push_back({i % 2 == 0 ? "user" : "assistant", "hi there"});
  }
  for (auto _ : state) {
    std::string prompt = chat_template->render(messages, /*add_generation_prompt=*/false);
    benchmark::DoNotOptimize(prompt);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // items: messages
}
BENCHMARK(BM_RenderIndexingChatTemplate)
    ->RangeMultiplier(10)
    ->Range(100, 100000)
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_ParseChatRequest)
    ->RangeMultiplier(10)
    ->Range(100, 100000)
    ->Unit(benchmark::kMillisecond);

void BM_EncodeChatTurns(benchmark::State& state) {
  const headway::serving::testing::TempDir dir("encode_benchmark");
  headway::serving::testing::write_tiny_bpe(dir.path(), {});
  const auto tokenizer = headway::core::Tokenizer::load(dir.path());
  std::string text;
  for (int64_t i = 0; i < state.range(0); ++i) {
    text += "<|start_header_id|>user<|end_header_id|>\n\nhi there, how are you?<|eot_id|>";
  }
  for (auto _ : state) {
    auto ids = tokenizer->encode(text);
    benchmark::DoNotOptimize(ids);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // items: turns
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_EncodeChatTurns)
    ->RangeMultiplier(10)
    ->Range(100, 10000)
    ->Unit(benchmark::kMillisecond);

// SentencePiece-style BPE (Llama 2's form): with no pre-tokenizer a stretch between special tokens
// is one word, so N turns without a special token between them are one word of N * 24
// characters, each looked up, most falling back to their byte's token in the tests' tiny
// vocabulary, then merged: the cost must stay linear-logarithmic in the word.
void BM_EncodeSentencePieceTurns(benchmark::State& state) {
  const headway::serving::testing::TempDir dir("encode_sentencepiece_benchmark");
  headway::serving::testing::write_text(
      dir.path() / "tokenizer.json",
      headway::serving::testing::tiny_sentencepiece_bpe_json().dump());
  const auto tokenizer = headway::core::Tokenizer::load(dir.path());
  std::string text;
  for (int64_t i = 0; i < state.range(0); ++i) text += "Hi there, how are you? ";
  for (auto _ : state) {
    auto ids = tokenizer->encode(text);
    benchmark::DoNotOptimize(ids);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // items: turns
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_EncodeSentencePieceTurns)
    ->RangeMultiplier(10)
    ->Range(100, 10000)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
