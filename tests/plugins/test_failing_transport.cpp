// A KV transport whose every transfer fails (after it started): for the serving tests of what a
// decode engine does when a request's KV cannot be moved to it (it prefills the request itself),
// and, with `pending_s`, of what happens to requests while a copy is in flight (aborts, shutdown).
// With `simulated_done`, a simulated transfer (no bytes behind its regions) reports DONE instead,
// once `pending_s` has passed: an asynchronous transport's modelled answer, for simulate's wait.
#include <chrono>
#include <headway/plugin.hpp>
#include <mutex>
#include <unordered_map>

namespace {

constexpr hw_option_spec kOptions[] = {
    headway::sdk::double_option("pending_s", 0.0, 0.0, 3600.0,
                                "Seconds a transfer reports PENDING before it reports FAILED."),
    headway::sdk::bool_option("simulated_done", false,
                              "A simulated transfer reports DONE (1 ms modelled), not FAILED."),
};

class FailingTransport final : public headway::sdk::KvTransport {
 public:
  FailingTransport(const headway::sdk::Host&, const headway::sdk::Options& options)
      : pending_s_(options.get_double("pending_s")),
        simulated_done_(options.get_bool("simulated_done")) {}

  uint64_t start(const hw_kv_transfer& t) override {
    std::lock_guard lock(mutex_);
    started_.emplace(next_, Started{std::chrono::steady_clock::now(),
                                    t.source.kind == HW_MEMORY_NONE && simulated_done_});
    return next_++;
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    std::lock_guard lock(mutex_);
    auto it = started_.find(handle);
    if (it == started_.end()) {
      throw headway::sdk::Error(HW_NOT_FOUND,
                                "test_failing: no transfer " + std::to_string(handle));
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.at).count();
    if (waited < pending_s_) return {HW_TRANSFER_PENDING, 0.0};
    const bool done = it->second.done;
    started_.erase(it);
    return done ? headway::sdk::TransferProgress{HW_TRANSFER_DONE, 1e-3}
                : headway::sdk::TransferProgress{HW_TRANSFER_FAILED, 0.0};
  }

 private:
  struct Started {
    std::chrono::steady_clock::time_point at;
    bool done;  // reports DONE when pending_s has passed
  };
  const double pending_s_;
  const bool simulated_done_;
  std::mutex mutex_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, Started> started_;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(FailingTransport, "org.headway.test.failing_transport", "test_failing",
                            "0.0.1", "Test plugin: every transfer fails", kOptions)
