// model-core: what a model must do whatever its weights: chunked prefill equals whole prefill,
// a request's output does not depend on its batch, the KV block table is honoured at any block
// size (and nothing outside it written), and a simulated model reports a duration. Against the CPU
// reference model on the same checkpoint when it is installed. See docs/conformance.md for the
// tolerances.
#include <fmt/format.h>
#include <headway/conformance/suite.h>
#include <headway/conformance/test_recorder.h>
#include <headway/core/error.h>
#include <headway/core/sampler.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <headway/sdk/sampling.hpp>
#include <headway/sdk/status.hpp>
#include <map>
#include <memory>
#include <random>

#include "model_runner.h"

namespace headway::conformance {
namespace {

// Logits may differ by accumulation order between chunkings and batchings: this much, relative to
// the largest logit magnitude (at least 1), is accepted. Sampled ids (greedy) must be equal.
constexpr double kInvarianceTolerance = 2e-3;
// Against the reference: bf16/fp16 weights and another kernel order.
constexpr double kReferenceTolerance = 2e-2;
constexpr const char* kReferenceModel = "org.headway.model.cpu";

Sequence make_sequence(uint64_t id, uint32_t length, const hw_model_info& info,
                       std::vector<uint32_t> blocks, std::mt19937_64& rng) {
  Sequence s;
  s.id = id;
  const uint32_t vocab = std::max<uint32_t>(info.vocab, 2);
  for (uint32_t i = 0; i < length; ++i) {
    s.tokens.push_back(
        static_cast<int32_t>(std::uniform_int_distribution<uint32_t>(0, vocab - 1)(rng)));
  }
  s.blocks = std::move(blocks);
  return s;
}

// Whole-sequence prefill slices, one per sequence, sampling the last position.
std::vector<SliceSpec> whole(std::initializer_list<size_t> sequences,
                             const std::vector<Sequence>& seqs) {
  std::vector<SliceSpec> batch;
  for (size_t i : sequences) {
    batch.push_back({i, 0, static_cast<uint32_t>(seqs[i].tokens.size()), true});
  }
  return batch;
}

void compare(TestRecorder& t, const std::string& what, const SampleOutput& a, const SampleOutput& b,
             double tolerance) {
  const double d = relative_difference(a, b);
  t.metrics()["relative_difference"] = std::isfinite(d) ? d : -1.0;
  if (!(d <= tolerance)) {
    t.fail(fmt::format("{}: outputs differ (relative difference {:.3g}, tolerance {:.3g})", what, d,
                       tolerance));
  } else {
    t.note(fmt::format("relative difference {:.3g} (tolerance {:.3g})", d, tolerance));
  }
}

// model.device_sampling. The engine samples a request on the host whenever it asks for what only
// the host does (logprobs, penalties, guided output) and leaves the others to a model that
// samples itself: unless the two pick the same token from the same row, a request's tokens for
// a seed change with whether it asks for log-probabilities. Each draw is compared with the
// core's sampler on the row the model returned for it.
void check_device_sampling(TestRecorder& t, const hw_model_info& info,
                           const core::PluginChoice& choice, const std::string& dir,
                           const std::vector<Sequence>& seqs) {
  if (info.returns_logits != 0 || info.returns_logits_on_request == 0) {
    t.not_supported(info.returns_logits != 0
                        ? "the host samples every request (returns_logits)"
                        : "returns_logits_on_request = 0: no rows to compare its tokens with");
    return;
  }
  struct Setting {
    const char* name;
    float temperature, top_p;
    uint32_t top_k;
    float min_p;
  };
  constexpr Setting kSettings[] = {{"temperature 1", 1.0f, 1.0f, 0, 0.0f},
                                   {"temperature 0.5", 0.5f, 1.0f, 0, 0.0f},
                                   {"temperature 0.7, top_k 5", 0.7f, 1.0f, 5, 0.0f},
                                   {"top_p 0.8", 1.0f, 0.8f, 0, 0.0f},
                                   {"temperature 1.3, min_p 0.1", 1.3f, 1.0f, 0, 0.1f},
                                   {"top_k 20, top_p 0.9, min_p 0.02", 1.0f, 0.9f, 20, 0.02f}};
  constexpr uint64_t kSeedsPerSetting = 8;
  // A weight this close below a cut may be above it by the model's own rounding of exp.
  constexpr double kCutSlack = 1e-4;
  ModelRunner runner(choice, dir);
  core::Sampler sampler;
  uint32_t draws = 0, differing = 0;
  std::string first_differing;
  std::vector<float> weights, scratch;
  for (const Setting& setting : kSettings) {
    for (uint64_t k = 0; k < kSeedsPerSetting; ++k) {
      std::vector<SliceSpec> batch = whole({0, 1, 2}, seqs);
      for (SliceSpec& s : batch) {
        s.temperature = setting.temperature;
        s.top_p = setting.top_p;
        s.top_k = setting.top_k;
        s.min_p = setting.min_p;
        s.seed = 7919 * k + s.sequence + 1;
        s.output_index = static_cast<uint32_t>(3 * k + s.sequence);
      }
      std::map<uint64_t, int32_t> ids;
      const auto rows = runner.run(seqs, {batch}, nullptr, nullptr, &ids);
      for (const SliceSpec& s : batch) {
        const uint64_t id = seqs[s.sequence].id;
        const SampleOutput& row = rows.at(id);
        const int32_t chosen = ids.at(id);
        ++draws;
        core::SamplingParams p;
        p.temperature = setting.temperature;
        p.top_p = setting.top_p;
        p.top_k = setting.top_k;
        p.min_p = setting.min_p;
        p.seed = *s.seed;
        std::vector<float> copy = row;
        const int32_t expected = sampler.sample(copy, p, s.output_index);
        // The core's kept set on this row: weights exp((l - max) / T), its cuts.
        const float best = *std::max_element(row.begin(), row.end());
        weights.resize(row.size());
        scratch.resize(row.size());
        for (size_t v = 0; v < row.size(); ++v) {
          const double w = std::exp((static_cast<double>(row[v]) - best) / p.temperature);
          weights[v] = std::isnan(w) ? 0.0f : static_cast<float>(w);
        }
        const float cut = sdk::sampling::keep_threshold(weights.data(), weights.size(), p.top_k,
                                                        p.top_p, p.min_p, scratch.data());
        const std::string where = fmt::format("{}, seed {}, output index {} (sequence {})",
                                              setting.name, p.seed, s.output_index, id);
        if (chosen < 0 || static_cast<size_t>(chosen) >= row.size()) {
          t.fail(fmt::format("{}: the model sampled token {}, outside a vocabulary of {}", where,
                             chosen, row.size()));
          continue;
        }
        const double w = weights[static_cast<size_t>(chosen)];
        if (!(w > 0.0) || w < cut * (1.0 - kCutSlack)) {
          t.fail(
              fmt::format("{}: the model sampled token {} (weight {:.3g}), which the filters "
                          "keep out (they keep weights from {:.3g}); the core sampled {}",
                          where, chosen, w, cut, expected));
          continue;
        }
        if (chosen != expected && differing++ == 0) {
          first_differing =
              fmt::format("{}: the model sampled {}, the core {}", where, chosen, expected);
        }
      }
    }
  }
  t.metrics()["draws"] = draws;
  t.metrics()["differing"] = differing;
  // Rounding (the model's exp, its sums) moves a token only when the draw lands that close to a
  // boundary: one in a few hundred at most on rows this size.
  if (differing * 20 > draws) {
    t.warn(fmt::format(
        "{} of {} draws picked another token than the core's sampler on the same row (first: {}): "
        "a request's tokens for a seed then change with whether it asks for log-probabilities "
        "(the host samples it then); headway/sdk/sampling.hpp has the core's draw and cuts",
        differing, draws, first_differing));
  } else {
    t.note(fmt::format("{} of {} draws equal to the core's sampler", draws - differing, draws));
  }
}

}  // namespace

std::vector<TestResult> run_model_profile(const SuiteContext& context) {
  const std::string dir = context.options.config_dir.string();
  const core::PluginChoice choice = context.plugin.choice();
  std::vector<TestResult> results;
  std::mt19937_64 rng(context.options.seed);

  TestRecorder info_test("model.info", "get_info() describes a usable model");
  std::unique_ptr<ModelRunner> first;
  try {
    first = std::make_unique<ModelRunner>(choice, dir);
  } catch (const core::Error& e) {
    throw_if_options_refused(context.plugin, e);
    info_test.fail(std::string("create() or init_kv() failed: ") + e.what());
    results.push_back(info_test.finish());
    return results;
  }
  const hw_model_info info = first->info();
  // vocab 0 or kv_bytes_per_token 0 failed above: the host refuses them at create
  // (core::ModelInstance). The suite's sequences (up to 57 tokens, more with prefixes) need
  // room.
  if (info.max_model_len < 64) {
    info_test.fail(
        fmt::format("max_model_len {} (the suite needs at least 64)", info.max_model_len));
  }
  info_test.note(fmt::format("vocab {}, max_model_len {}, {} {}", info.vocab, info.max_model_len,
                             info.returns_logits              ? "returns logits"
                             : info.returns_logits_on_request ? "samples itself, returns logits "
                                                                "on request"
                                                              : "samples itself",
                             info.reports_duration ? "on a virtual clock" : "on the wall clock"));
  results.push_back(info_test.finish());
  // A model that returns logits on request is asked for every sampled row (ModelRunner), so that
  // the tests compare rows there too.
  const bool rows = first->returns_rows();
  const double tolerance = rows ? kInvarianceTolerance : 0.0;

  // Sequences: A (40 tokens) on blocks 0-2, B and C on other blocks; A2 is A on scattered blocks.
  std::vector<Sequence> seqs;
  seqs.push_back(make_sequence(1, 40, info, {0, 1, 2}, rng));
  seqs.push_back(make_sequence(2, 23, info, {3, 4}, rng));
  seqs.push_back(make_sequence(3, 57, info, {5, 6, 7, 8}, rng));
  Sequence scattered = seqs[0];
  scattered.blocks = {29, 11, 20};
  seqs.push_back(scattered);

  auto guarded = [&](TestRecorder t, auto&& body) {
    try {
      body(t);
    } catch (const core::Error& e) {
      t.fail(std::string("the model failed: ") + e.what());
    }
    results.push_back(t.finish());
  };
  SampleOutput alone;
  guarded(TestRecorder("model.chunking_invariance",
                       "prefill in chunks of 16, 16 and 8 equals the whole prefill"),
          [&](TestRecorder& t) {
            alone = first->run(seqs, {whole({0}, seqs)})[1];
            ModelRunner chunked(choice, dir);
            const auto out =
                chunked.run(seqs, {{{0, 0, 16, false}}, {{0, 16, 16, false}}, {{0, 32, 8, true}}});
            compare(t, "chunked vs whole", out.at(1), alone, tolerance);
          });
  guarded(TestRecorder("model.batch_invariance",
                       "a request's output does not depend on the others in its batch"),
          [&](TestRecorder& t) {
            ModelRunner batched(choice, dir);
            const auto out = batched.run(seqs, {whole({1, 0, 2}, seqs)});
            compare(t, "in a batch of 3 vs alone", out.at(1), alone, tolerance);
            // The first and last of the batch too: rows written in another order than the
            // slices' would pass the middle one.
            ModelRunner separate(choice, dir);
            const auto one = separate.run(seqs, {whole({1}, seqs), whole({2}, seqs)});
            compare(t, "first of a batch of 3 vs alone", out.at(2), one.at(2), tolerance);
            compare(t, "last of a batch of 3 vs alone", out.at(3), one.at(3), tolerance);
          });
  guarded(TestRecorder("model.shared_prefix",
                       "a request may start past a prefix whose KV another request's tokens "
                       "wrote (prefix caching): its KV lives in its blocks, not per request id"),
          [&](TestRecorder& t) {
            // B shares sequence 1's first two blocks (32 tokens), then goes on with its own.
            Sequence b = make_sequence(5, 52, info, {0, 1, 9, 10}, rng);
            std::copy(seqs[0].tokens.begin(), seqs[0].tokens.begin() + 32, b.tokens.begin());
            std::vector<Sequence> shared = {seqs[0], b};
            ModelRunner runner(choice, dir);
            const auto out = runner.run(shared, {whole({0}, shared), {{1, 32, 20, true}}});
            Sequence own = b;
            own.blocks = {12, 13, 14, 15};
            std::vector<Sequence> alone_b = {own};
            const auto from_scratch = ModelRunner(choice, dir).run(alone_b, {whole({0}, alone_b)});
            compare(t, "after another request's prefix vs from scratch", out.at(5),
                    from_scratch.at(5), tolerance);
          });
  guarded(
      TestRecorder("model.kv_layout",
                   "the block table is honoured: scattered blocks give the same output, and "
                   "no KV byte outside the table changes"),
      [&](TestRecorder& t) {
        ModelRunner runner(choice, dir);
        const hw_memory_desc kv = runner.model().kv_memory();
        std::vector<uint8_t> before;
        const bool host = kv.kind == HW_MEMORY_HOST && kv.base != nullptr && kv.block_bytes > 0;
        if (host) {
          if (kv.block_stride < kv.block_bytes ||
              kv.bytes < uint64_t{ModelRunner::kBlocks - 1} * kv.block_stride + kv.block_bytes) {
            t.fail(
                fmt::format("kv_memory() declares {} bytes, stride {}, block {} for {} "
                            "blocks",
                            kv.bytes, kv.block_stride, kv.block_bytes, ModelRunner::kBlocks));
            return;
          }
          std::memset(kv.base, 0x5A, kv.bytes);
          before.assign(static_cast<uint8_t*>(kv.base), static_cast<uint8_t*>(kv.base) + kv.bytes);
        }
        // Sequence 1 again, on blocks 29, 11 and 20 (seqs[3] has the same tokens and id).
        std::vector<Sequence> moved = {seqs[3]};
        const auto out = runner.run(moved, {whole({0}, moved)});
        compare(t, "scattered vs contiguous blocks", out.at(1), alone, tolerance);
        if (!host) {
          t.note(
              "no addressable KV memory (kv_memory kind is not host): table checked "
              "through outputs only");
          return;
        }
        const auto* now = static_cast<const uint8_t*>(kv.base);
        bool wrote_table = false;
        for (uint64_t i = 0; i < kv.bytes; ++i) {
          const uint64_t block = i / kv.block_stride;
          const bool in_table =
              (i % kv.block_stride) < kv.block_bytes && (block == 29 || block == 11 || block == 20);
          if (in_table) {
            wrote_table |= now[i] != before[i];
          } else if (now[i] != before[i]) {
            t.fail(fmt::format("KV byte {} (block {}) changed, outside the block table", i, block));
            return;
          }
        }
        if (!wrote_table) t.fail("no byte of the request's blocks changed: KV not written there");
      });
  guarded(TestRecorder(
              "model.block_sizes",
              "block sizes 8 and 32 (a deployment's block_size) give block 16's output, whole "
              "and in chunks that cross blocks, and keep each sequence's KV in its own blocks"),
          [&](TestRecorder& t) {
            // Sequence 1 (40 tokens) on scattered blocks of each size, its table followed by guard
            // entries naming block 5. A model that addresses KV with a block size of its own keeps
            // itself consistent alone; beside another sequence it reaches that one's KV: at size 8
            // through a shared first block (a prefix), at size 32 past its table, in block 5.
            const std::vector<std::pair<uint32_t, std::vector<uint32_t>>> shapes = {
                {8, {30, 3, 17, 9, 24, 14}}, {32, {7, 2}}};
            uint32_t refused = 0;
            for (const auto& [block_size, blocks] : shapes) {
              // A model may refuse a block size at init_kv (the deployment then fails at load,
              // naming it): safe, and said in a note.
              std::unique_ptr<ModelRunner> runner;
              try {
                runner = std::make_unique<ModelRunner>(choice, dir, block_size);
              } catch (const core::PluginContractError& e) {
                // An exception through the C ABI, an undefined code: no refusal.
                t.fail(
                    fmt::format("block size {}: create() or init_kv() broke abi.h's contract: "
                                "{}",
                                block_size, e.what()));
                continue;
              } catch (const core::Error& e) {
                t.note(fmt::format("block size {} refused at init_kv: {}", block_size, e.what()));
                ++refused;
                continue;
              }
              Sequence a = seqs[0];
              a.blocks = blocks;
              a.table_blocks = (40 + block_size - 1) / block_size;
              a.blocks.resize(a.table_blocks);
              a.blocks.insert(a.blocks.end(), 3, 5u);
              const std::vector<Sequence> one = {a};
              const auto whole_out = runner->run(one, {whole({0}, one)});
              compare(t, fmt::format("block size {}, whole prefill vs block size 16", block_size),
                      whole_out.at(1), alone, tolerance);
              const auto chunked =
                  ModelRunner(choice, dir, block_size)
                      .run(one, {{{0, 0, 12, false}}, {{0, 12, 20, false}}, {{0, 32, 8, true}}});
              compare(
                  t,
                  fmt::format("block size {}, chunks of 12, 20 and 8 vs block size 16", block_size),
                  chunked.at(1), alone, tolerance);
              if (block_size == 8) {
                // A 41st token for sequence 1 after another sequence, sharing its first block (8
                // tokens), prefilled its own 16 tokens on blocks 12 and 19.
                Sequence longer = a;
                longer.id = 11;
                longer.tokens.push_back(make_sequence(0, 1, info, {}, rng).tokens[0]);
                longer.blocks = blocks;  // six blocks of 8 for its 41 tokens
                longer.table_blocks = 0;
                Sequence other = make_sequence(12, 24, info, {30, 12, 19}, rng);
                std::copy(a.tokens.begin(), a.tokens.begin() + 8, other.tokens.begin());
                const std::vector<Sequence> both = {longer, other};
                const auto beside =
                    ModelRunner(choice, dir, block_size)
                        .run(both, {{{0, 0, 40, false}}, {{1, 8, 16, true}}, {{0, 40, 1, true}}});
                const auto by_itself = ModelRunner(choice, dir, block_size)
                                           .run(both, {{{0, 0, 40, false}}, {{0, 40, 1, true}}});
                compare(t, "block size 8, after another sequence shared its first block vs alone",
                        beside.at(11), by_itself.at(11), tolerance);
              } else {
                // Another sequence's 24th token after sequence 1's prefill, its 23 before in block
                // 5 (its table of one block followed by guards naming block 6).
                Sequence other = make_sequence(13, 24, info, {5, 6, 6}, rng);
                other.table_blocks = 1;
                const std::vector<Sequence> both = {other, a};
                const auto beside =
                    ModelRunner(choice, dir, block_size)
                        .run(both, {{{0, 0, 23, false}}, {{1, 0, 40, false}}, {{0, 23, 1, true}}});
                const auto by_itself = ModelRunner(choice, dir, block_size)
                                           .run(both, {{{0, 0, 23, false}}, {{0, 23, 1, true}}});
                compare(t, "block size 32, after a sequence in other blocks vs alone",
                        beside.at(13), by_itself.at(13), tolerance);
              }
            }
            if (refused == shapes.size()) {
              t.not_supported("block sizes 8 and 32 both refused at init_kv: only 16 checked");
            }
          });
  guarded(TestRecorder("model.neighbour_blocks",
                       "a slice that ends on a block boundary, at the end of its block table, "
                       "leaves the next block (another request's) as it was"),
          [&](TestRecorder& t) {
            // B (24 tokens) prefills 23 on blocks 5 and 6; A (32 tokens) fills blocks 3 and 4
            // exactly, in two chunks that end on block boundaries, the last at the end of its
            // table: the block after it is B's first. B's last token must then see the KV it
            // would have seen alone. Needs no kv_memory(): checked through B's output.
            Sequence b = make_sequence(6, 24, info, {5, 6}, rng);
            Sequence a = make_sequence(7, 32, info, {3, 4}, rng);
            const std::vector<Sequence> pair = {b, a};
            const auto beside = ModelRunner(choice, dir)
                                    .run(pair, {{{0, 0, 23, false}},
                                                {{1, 0, 16, false}},
                                                {{1, 16, 16, true}},
                                                {{0, 23, 1, true}}});
            const std::vector<Sequence> only_b = {b};
            const auto by_itself =
                ModelRunner(choice, dir).run(only_b, {{{0, 0, 23, false}}, {{0, 23, 1, true}}});
            compare(t, "after a neighbour filled the blocks before its own vs alone", beside.at(6),
                    by_itself.at(6), tolerance);
          });
  guarded(TestRecorder("model.prompt_logits",
                       "a slice that asks for all its logits (prompt log-probabilities) gets, "
                       "for each position, the last row of a prefill ending there"),
          [&](TestRecorder& t) {
            if (!rows || !info.returns_prompt_logits) {
              t.not_supported("returns_prompt_logits = 0: the host asks for no such rows");
              return;
            }
            // Declared in get_info(), which the host acts on: a failure counts against
            // conformance as a declared feature's does.
            t.for_declared_feature();
            // Sequence 1 in two chunks, beside sequence 2's whole prefill in the first.
            ModelRunner runner(choice, dir);
            std::map<uint64_t, std::vector<SampleOutput>> rows;
            const auto out = runner.run(
                seqs, {{{0, 0, 24, false, true}, {1, 0, 23, true}}, {{0, 24, 16, true, true}}},
                nullptr, &rows);
            compare(t, "sequence 2 beside them vs alone", out.at(2),
                    ModelRunner(choice, dir).run(seqs, {whole({1}, seqs)}).at(2), tolerance);
            if (rows[1].size() != 40) {
              t.fail(fmt::format("{} rows for 40 positions", rows[1].size()));
              return;
            }
            for (const uint32_t end : {1u, 6u, 16u, 17u, 24u, 25u, 33u, 40u}) {
              Sequence prefix = seqs[0];
              prefix.id = 100 + end;
              prefix.tokens.resize(end);
              const std::vector<Sequence> alone = {prefix};
              const auto want = ModelRunner(choice, dir).run(alone, {whole({0}, alone)});
              compare(t, fmt::format("position {} vs a prefill of {} tokens", end - 1, end),
                      rows[1][end - 1], want.at(prefix.id), tolerance);
            }
          });
  guarded(TestRecorder("model.logits_on_request",
                       "a model that samples itself writes the rows the host asks for and no "
                       "others, each the distribution its own greedy choice comes from"),
          [&](TestRecorder& t) {
            if (info.returns_logits || !info.returns_logits_on_request) {
              t.not_supported("returns_logits_on_request = 0: the host asks for no rows");
              return;
            }
            t.for_declared_feature();
            // Sequences 1 and 3 ask for their rows, sequence 2 between them does not; then all
            // three again, each asking.
            std::vector<std::vector<SliceSpec>> some = {whole({0, 1, 2}, seqs)};
            some[0][1].row_wanted = false;
            std::map<uint64_t, int32_t> ids, ids_all;
            const auto out = ModelRunner(choice, dir).run(seqs, some, nullptr, nullptr, &ids);
            const auto all = ModelRunner(choice, dir)
                                 .run(seqs, {whole({0, 1, 2}, seqs)}, nullptr, nullptr, &ids_all);
            compare(t, "sequence 1's row beside an unasked one vs alone", out.at(1), alone,
                    tolerance);
            compare(t, "sequence 3's row beside an unasked one vs all asked", out.at(3), all.at(3),
                    tolerance);
            if (out.at(2).size() != 1 || static_cast<int32_t>(out.at(2)[0]) != ids_all.at(2)) {
              t.fail(fmt::format("sequence 2 sampled {} without its row and {} with it (greedy)",
                                 ids.at(2), ids_all.at(2)));
            }
            for (const uint64_t id : {1u, 2u, 3u}) {
              // Greedy sampling on the device picks the row's most likely token (or one as
              // likely).
              const SampleOutput& row = all.at(id);
              const size_t best = std::max_element(row.begin(), row.end()) - row.begin();
              const int32_t chosen = ids_all.at(id);
              if (chosen < 0 || static_cast<size_t>(chosen) >= row.size() ||
                  row[static_cast<size_t>(chosen)] < row[best]) {
                t.fail(fmt::format(
                    "sequence {}: the model sampled token {} greedily, its row's most likely is "
                    "{} (logit {})",
                    id, chosen, best, row[best]));
              }
            }
          });
  guarded(TestRecorder("model.device_sampling",
                       "a model that samples itself picks, at a temperature and with top-k, top-p "
                       "and min-p, the token the core's sampler picks from the row it returns "
                       "(headway/sdk/sampling.hpp)"),
          [&](TestRecorder& t) { check_device_sampling(t, info, choice, dir, seqs); });
  guarded(TestRecorder("model.reports_cost",
                       "a model on the virtual clock reports a positive, finite step duration"),
          [&](TestRecorder& t) {
            if (!info.reports_duration) {
              t.note("duration measured on the wall clock by the engine");
              return;
            }
            ModelRunner runner(choice, dir);
            std::vector<double> seconds;
            runner.run(seqs, {whole({0, 1, 2}, seqs)}, &seconds);
            if (seconds.empty() || !std::isfinite(seconds[0]) || seconds[0] <= 0) {
              t.fail(fmt::format("reported {} s for a step of 120 tokens",
                                 seconds.empty() ? 0.0 : seconds[0]));
            } else {
              t.note(fmt::format("{:.3g} ms for a step of 120 tokens", seconds[0] * 1e3));
            }
          });
  guarded(TestRecorder("model.reference_logits",
                       fmt::format("logits match the CPU reference model on the same checkpoint "
                                   "(relative tolerance {:.3g})",
                                   kReferenceTolerance)),
          [&](TestRecorder& t) {
            if (!rows) {
              t.not_supported(
                  "the model samples itself and returns no logits (returns_logits and "
                  "returns_logits_on_request = 0): no logits to compare");
              return;
            }
            if (!context.plugin.has_option("path", HW_OPTION_STRING)) {
              t.not_supported(
                  "the model has no `path` option naming a checkpoint to share with "
                  "the reference");
              return;
            }
            // The reference is the CPU model found in the search directories, never the plugin
            // under test itself unless it is that file (a faulty copy may carry the same name).
            core::PluginChoice reference;
            for (const core::LoadedPlugin* candidate : context.plugin.registry->discover()) {
              if (candidate->kind() != HW_KIND_MODEL || candidate->name() != kReferenceModel)
                continue;
              if (reference.plugin == nullptr || candidate != context.plugin.plugin) {
                reference.plugin = candidate;
              }
            }
            if (reference.plugin == nullptr) {
              t.skip(std::string("the CPU reference model (") + kReferenceModel +
                     ", headway_model_cpu.so) is not installed in the plugin search path");
              return;
            }
            std::string path;
            for (const hw_option_value& v : context.plugin.options->values()) {
              if (sdk::view(v.key) == "path") path = std::string(sdk::view(v.string_value));
            }
            reference.where = "reference model";
            reference.options = parse_options(*reference.plugin->descriptor,
                                              "path = " + nlohmann::json(path).dump());
            // A `path` that is no Hugging Face checkpoint directory (a GGUF file) leaves nothing
            // to compare with: the reference's limit, not the plugin's fault. A checkpoint the
            // reference fails to load is a failure: the plugin claims to compute it.
            std::filesystem::path checkpoint(path);
            if (checkpoint.is_relative()) checkpoint = context.options.config_dir / checkpoint;
            std::error_code ignored;
            if (!std::filesystem::is_regular_file(checkpoint / "config.json", ignored)) {
              t.not_supported("path = " + nlohmann::json(path).dump() +
                              " is not a checkpoint directory with a config.json, which the CPU "
                              "reference model reads: no reference to compare with");
              return;
            }
            std::unique_ptr<ModelRunner> ref;
            try {
              ref = std::make_unique<ModelRunner>(reference, dir);
            } catch (const core::Error& e) {
              t.fail(std::string("the CPU reference model could not load path = ") +
                     nlohmann::json(path).dump() + ": " + e.what());
              return;
            }
            const auto out = ref->run(seqs, {whole({0, 1, 2}, seqs)});
            ModelRunner mine(choice, dir);
            const auto got = mine.run(seqs, {whole({0, 1, 2}, seqs)});
            for (uint64_t id : {1, 2, 3}) {
              compare(t, fmt::format("request {} vs reference", id), got.at(id), out.at(id),
                      kReferenceTolerance);
            }
          });
  return results;
}

}  // namespace headway::conformance
