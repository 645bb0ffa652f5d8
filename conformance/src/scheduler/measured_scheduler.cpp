#include "measured_scheduler.h"

#include <fmt/format.h>
#include <headway/core/error.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>

namespace headway::conformance {

MeasuredScheduler::MeasuredScheduler(const PluginUnderTest& p, uint32_t running, uint32_t waiting)
    : facts_{sizeof(hw_engine_facts), kBlockSize, 1u << 20, 8192, HW_ENGINE_ROLE_MIXED},
      host_("conformance", &clock_),
      slice_room_(running + waiting),
      preempted_room_(running) {
  plan_arrays_.plan(slice_room_, preempted_room_);  // allocated now, not while heap is watched
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
         plan_arrays_.plan(
             std::min(slice_room_, static_cast<uint32_t>(running.size() + waiting.size())),
             std::min(preempted_room_, static_cast<uint32_t>(running.size())))};
  scheduler_->schedule(s.snapshot, s.plan);
  if (const std::optional<std::string> past = plan_arrays_.overrun()) {
    throw core::PluginContractError("schedule() wrote past the plan's " + *past +
                                        ": a plugin writes no entry past a "
                                        "capacity (abi.h)",
                                    HW_INTERNAL);
  }
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
