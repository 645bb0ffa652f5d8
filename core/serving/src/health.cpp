#include <fmt/format.h>
#include <headway/serving/generation_service.h>

namespace headway::serving {

HealthSummary summarize_health(bool admitting, const std::vector<EngineHealth>& engines) {
  HealthSummary health;
  health.engines_total = static_cast<uint32_t>(engines.size());
  uint32_t can_finish = 0;
  std::string stuck;  // "engine 0 (in one step for 130 s), ..."
  for (size_t i = 0; i < engines.size(); ++i) {
    const EngineHealth& e = engines[i];
    if (e.alive && e.step_seconds >= kStuckStepSeconds) {
      stuck += fmt::format("{}engine {} (in one step for {:.0f} s)", stuck.empty() ? "" : ", ", i,
                           e.step_seconds);
      continue;
    }
    health.engines_alive += e.alive ? 1 : 0;
    can_finish += e.alive && e.role != HW_ENGINE_ROLE_PREFILL ? 1 : 0;
  }
  health.serving = admitting && can_finish > 0;
  if (!admitting) {
    health.draining = true;
    health.reason = "draining: no new requests are admitted";
  } else if (can_finish == 0 && !stuck.empty()) {
    health.reason = fmt::format(
        "no engine can finish a request: {} stuck, a model or scheduler call that has not "
        "returned for over {:.0f} s",
        stuck, kStuckStepSeconds);
  } else if (health.engines_alive == 0) {
    health.reason = fmt::format("no engine is alive (0 of {})", health.engines_total);
  } else if (can_finish == 0) {
    health.reason = fmt::format(
        "no decode engine is alive ({} of {} engines alive, all of them prefill engines, which "
        "cannot finish a request)",
        health.engines_alive, health.engines_total);
  }
  return health;
}

}  // namespace headway::serving
