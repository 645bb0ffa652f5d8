#include "measured_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

namespace headway::conformance {

MeasuredScheduler::MeasuredScheduler(const PluginUnderTest& p, uint32_t running, uint32_t waiting)
    : facts_{sizeof(hw_engine_facts), kBlockSize, 1u << 20, 8192, HW_ENGINE_ROLE_MIXED},
      host_("conformance", &clock_),
      slices_(static_cast<size_t>(running) + waiting),
      preempted_(std::max<uint32_t>(running, 1)) {
  const std::string defaults = p.has_option("max_num_seqs", HW_OPTION_INT)
                                   ? fmt::format("max_num_seqs = {}", running + 24)
                                   : std::string();
  scheduler_ = std::make_unique<core::SchedulerInstance>(p.choice_with(defaults), facts_, host_);
}

hw_scheduler_snapshot MeasuredScheduler::snapshot(uint64_t step,
                                                  std::span<const hw_request_view> running,
                                                  std::span<const hw_request_view> waiting,
                                                  uint32_t blocks_used) const {
  return hw_scheduler_snapshot{sizeof(hw_scheduler_snapshot),
                               step,
                               clock_.now(),
                               running.data(),
                               static_cast<uint32_t>(running.size()),
                               waiting.data(),
                               static_cast<uint32_t>(waiting.size()),
                               facts_.kv_blocks_total - blocks_used,
                               facts_.kv_blocks_total,
                               kBlockSize,
                               facts_.max_model_len};
}

namespace {

// Equal bit for bit: a NaN written over a NaN, or -0.0 over 0.0, is a write too.
template <class T>
bool same_bits(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, double>) {
    return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
  } else {
    return a == b;
  }
}

// The first field of `a` that differs from `b`, as "priority 0 -> -1", or "" when none does.
std::string changed_field(const hw_request_view& a, const hw_request_view& b) {
#define HEADWAY_COMPARE_FIELD(field)                             \
  if (!same_bits(a.field, b.field)) {                            \
    return fmt::format("{} {} -> {}", #field, a.field, b.field); \
  }
  HEADWAY_COMPARE_FIELD(id)
  HEADWAY_COMPARE_FIELD(state)
  HEADWAY_COMPARE_FIELD(priority)
  HEADWAY_COMPARE_FIELD(prompt_tokens)
  HEADWAY_COMPARE_FIELD(output_tokens)
  HEADWAY_COMPARE_FIELD(total_tokens)
  HEADWAY_COMPARE_FIELD(computed_tokens)
  HEADWAY_COMPARE_FIELD(max_output_tokens)
  HEADWAY_COMPARE_FIELD(blocks_held)
  HEADWAY_COMPARE_FIELD(arrival_time)
  HEADWAY_COMPARE_FIELD(admission_order)
  HEADWAY_COMPARE_FIELD(preemptions)
  HEADWAY_COMPARE_FIELD(blocks_shared)
#undef HEADWAY_COMPARE_FIELD
  return {};
}

std::string first_write(const char* queue, std::span<const hw_request_view> before,
                        std::span<const hw_request_view> after) {
  for (size_t i = 0; i < before.size(); ++i) {
    if (std::string field = changed_field(before[i], after[i]); !field.empty()) {
      return fmt::format("{}[{}] (request {}): {}", queue, i, before[i].id, field);
    }
  }
  return {};
}

}  // namespace

MeasuredScheduler::Step MeasuredScheduler::plan(uint64_t step,
                                                std::span<const hw_request_view> running,
                                                std::span<const hw_request_view> waiting,
                                                uint32_t blocks_used, std::string* writes) {
  if (writes != nullptr) {
    running_before_.assign(running.begin(), running.end());
    waiting_before_.assign(waiting.begin(), waiting.end());
  }
  const hw_scheduler_snapshot expected = snapshot(step, running, waiting, blocks_used);
  Step s{expected,
         hw_scheduler_plan{
             sizeof(hw_scheduler_plan), slices_.data(),
             static_cast<uint32_t>(std::min(slices_.size(), running.size() + waiting.size())), 0,
             preempted_.data(), static_cast<uint32_t>(std::min(preempted_.size(), running.size())),
             0}};
  scheduler_->schedule(s.snapshot, s.plan);
  if (writes == nullptr) return s;
  const auto fields = [](const hw_scheduler_snapshot& x) {
    return std::tie(x.struct_size, x.step_index, x.now, x.running, x.running_count, x.waiting,
                    x.waiting_count, x.kv_blocks_free, x.kv_blocks_total, x.block_size,
                    x.max_model_len);
  };
  if (fields(s.snapshot) != fields(expected)) {
    *writes = "the snapshot itself (its queue pointers, counts, clock or KV figures)";
  } else if (std::string w = first_write("running", running_before_, running); !w.empty()) {
    *writes = std::move(w);
  } else {
    *writes = first_write("waiting", waiting_before_, waiting);
  }
  return s;
}

}  // namespace headway::conformance
