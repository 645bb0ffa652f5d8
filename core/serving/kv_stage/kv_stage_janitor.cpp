#include "kv_stage_janitor.h"

#include <spdlog/spdlog.h>

#include "kv_stage_file.h"

namespace headway::serving {

KvStageJanitor::KvStageJanitor(std::chrono::milliseconds period, std::chrono::seconds lifetime)
    : thread_([this, period, lifetime](std::stop_token stop) {
        std::unique_lock lock(mutex_);
        while (true) {
          // Returns early only when the destructor asks the thread to stop.
          if (wake_.wait_for(lock, stop, period, [&stop] { return stop.stop_requested(); })) {
            return;
          }
          lock.unlock();
          const size_t removed =
              sweep_expired_kv_stages(std::chrono::duration<double>(lifetime).count());
          if (removed > 0) {
            spdlog::warn("removed {} staged KV objects nobody read within {} s", removed,
                         lifetime.count());
          }
          lock.lock();
        }
      }) {}

KvStageJanitor::~KvStageJanitor() {
  thread_.request_stop();  // wakes the wait (condition_variable_any with a stop token)
}

}  // namespace headway::serving
