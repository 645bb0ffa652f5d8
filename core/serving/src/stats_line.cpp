#include <fmt/format.h>
#include <headway/serving/stats_line.h>

#include <algorithm>

namespace headway::serving {

namespace {
// How much fuller than the sum an engine's KV cache must be to be named (fractions).
constexpr double kFullestKvMargin = 0.10;
}  // namespace

StatsSample take_stats_sample(const GenerationService& service, double seconds) {
  StatsSample sample;
  sample.seconds = seconds;
  sample.totals = service.totals();
  for (const EngineSummary& engine : service.cluster_info().engines) {
    ++sample.engines_total;
    if (!engine.alive) continue;
    if (engine.step_seconds > sample.longest_step_seconds) {
      sample.longest_step_seconds = engine.step_seconds;
      sample.longest_step_engine = engine.index;
    }
    ++sample.engines_alive;
    sample.running += engine.running;
    sample.waiting += engine.waiting;
    const uint64_t used =
        engine.kv_blocks_total - std::min(engine.kv_blocks_free, engine.kv_blocks_total);
    sample.kv_blocks_total += engine.kv_blocks_total;
    sample.kv_blocks_used += used;
    if (engine.kv_blocks_total > 0) {
      const double fraction =
          static_cast<double>(used) / static_cast<double>(engine.kv_blocks_total);
      if (fraction > sample.fullest_kv_fraction) {
        sample.fullest_kv_fraction = fraction;
        sample.fullest_kv_engine = engine.index;
      }
    }
  }
  return sample;
}

std::string stats_line(const StatsSample& before, const StatsSample& now) {
  const ServiceTotals& a = before.totals;
  const ServiceTotals& b = now.totals;
  // A process whose engines run steps counts the prompt tokens they compute; a router only the
  // prompts it admits.
  const bool runs_steps = b.prefill_tokens > 0.0;
  const double prompt =
      runs_steps ? b.prefill_tokens - a.prefill_tokens : b.prompt_tokens - a.prompt_tokens;
  const double generated = b.generation_tokens - a.generation_tokens;
  const double queries = b.prefix_cache_queries - a.prefix_cache_queries;
  const double preemptions = b.preemptions - a.preemptions;
  if (prompt <= 0.0 && generated <= 0.0 && now.running == 0 && now.waiting == 0 &&
      now.engines_alive == before.engines_alive) {
    return {};
  }
  const double seconds = now.seconds - before.seconds;
  const auto rate = [&](double tokens) { return seconds > 0.0 ? tokens / seconds : 0.0; };
  std::string line = fmt::format(
      "prompt {:.1f} tokens/s, generation {:.1f} tokens/s, running {}, "
      "waiting {}",
      rate(prompt), rate(generated), now.running, now.waiting);
  if (now.kv_blocks_total > 0) {
    const double used =
        static_cast<double>(now.kv_blocks_used) / static_cast<double>(now.kv_blocks_total);
    line += fmt::format(", KV cache {:.1f}% used", 100.0 * used);
    // A sum over engines of different sizes hides a full one: it is named when it stands out.
    if (now.fullest_kv_fraction >= used + kFullestKvMargin) {
      line += fmt::format(" (engine {} at {:.1f}%)", now.fullest_kv_engine,
                          100.0 * now.fullest_kv_fraction);
    }
  }
  if (queries > 0.0) {
    line += fmt::format(", prefix cache {:.1f}% hit",
                        100.0 * (b.prefix_cache_hits - a.prefix_cache_hits) / queries);
  }
  if (preemptions > 0.0) line += fmt::format(", {:.0f} preemptions", preemptions);
  if (now.engines_alive < now.engines_total) {
    line += fmt::format(", engines {} of {} alive", now.engines_alive, now.engines_total);
  }
  if (now.longest_step_seconds >= kSlowStepSeconds) {
    line += fmt::format(
        ", engine {} in one step for {:.0f} s (a model or scheduler call that "
        "has not returned?)",
        now.longest_step_engine, now.longest_step_seconds);
  }
  return line;
}

}  // namespace headway::serving
