#include "measured_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

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

MeasuredScheduler::Step MeasuredScheduler::plan(uint64_t step,
                                                std::span<const hw_request_view> running,
                                                std::span<const hw_request_view> waiting,
                                                uint32_t blocks_used) {
  Step s{hw_scheduler_snapshot{sizeof(hw_scheduler_snapshot), step, clock_.now(), running.data(),
                               static_cast<uint32_t>(running.size()), waiting.data(),
                               static_cast<uint32_t>(waiting.size()),
                               facts_.kv_blocks_total - blocks_used, facts_.kv_blocks_total,
                               kBlockSize, facts_.max_model_len},
         hw_scheduler_plan{
             sizeof(hw_scheduler_plan), slices_.data(),
             static_cast<uint32_t>(std::min(slices_.size(), running.size() + waiting.size())), 0,
             preempted_.data(), static_cast<uint32_t>(std::min(preempted_.size(), running.size())),
             0}};
  scheduler_->schedule(s.snapshot, s.plan);
  return s;
}

}  // namespace headway::conformance
