// Cost per generated id of turning ids into final text (serving::make_incremental_decoder), by how
// many ids a read of the stream brings: 1 when the consumer keeps up with the engine, more when it
// falls behind. The decoder takes the ids one at a time whatever the read (so the text does not
// depend on it), so the cost per id should not grow with the read. Byte tokenizer, text with a
// two-byte character every 7 bytes, and (second argument 1) a stop string that never matches or
// (0) none.
// See docs/performance.md, "Text decoding".
#include <benchmark/benchmark.h>
#include <headway/core/byte_tokenizer.h>
#include <headway/serving/text_decoder.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

namespace {

void BM_DecodeStreamedIds(benchmark::State& state) {
  const size_t per_read = static_cast<size_t>(state.range(0));
  std::vector<std::string> stops;
  if (state.range(1) != 0) stops.push_back("STOP");
  const headway::core::ByteTokenizer bytes(0, 256, 257, 300);
  std::vector<int32_t> ids(4096, 'a');
  for (size_t i = 0; i + 1 < ids.size(); i += 7) {
    ids[i] = 0xC3;  // "é", split across two ids
    ids[i + 1] = 0xA9;
  }
  for (auto _ : state) {
    auto decoder = headway::serving::make_incremental_decoder(bytes, {.stop_strings = stops});
    size_t text = 0;
    for (size_t at = 0; at < ids.size(); at += per_read) {
      text +=
          decoder->append(std::span(ids).subspan(at, std::min(per_read, ids.size() - at))).size();
    }
    benchmark::DoNotOptimize(text);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ids.size()));
}
BENCHMARK(BM_DecodeStreamedIds)->ArgsProduct({{1, 16, 256}, {1, 0}});

}  // namespace

BENCHMARK_MAIN();
