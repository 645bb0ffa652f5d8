// Faulty on purpose: the SDK template's FCFS scheduler, declaring (and planning to) limits of at
// least 8,192 tokens a step and 256 requests running, whatever its max_num_batched_tokens and
// max_num_seqs options say. Every plan fits the declared limits, which is all the engine checks:
// the operator's budget (sized for activation memory, or for inter-token latency) is silently
// replaced. The suite must report scheduler.honours_options as FAIL.
#include <algorithm>
#include <headway/plugin.hpp>

#include "template_fcfs.h"

namespace {

class OptionsIgnoringScheduler final : public headway::faulty::TemplateScheduler {
 public:
  OptionsIgnoringScheduler(const headway::sdk::Host&, const headway::sdk::Options& options,
                           const hw_engine_facts&)
      : TemplateScheduler(options) {
    budget_ = std::max<uint32_t>(budget_, 8192);  // the fault
    max_seqs_ = std::max<uint32_t>(max_seqs_, 256);
  }
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(OptionsIgnoringScheduler, "org.headway.faulty.options_ignoring",
                         "faulty_options_ignoring", "0.0.1",
                         "Faulty on purpose: declares limits above its options",
                         headway::faulty::kLimitOptions)
