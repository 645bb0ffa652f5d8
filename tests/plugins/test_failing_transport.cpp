// A KV transport whose every transfer fails (after it started): for the serving tests of what a
// decode engine does when a request's KV cannot be moved to it (it prefills the request itself).
#include <headway/plugin.hpp>
#include <mutex>

namespace {

class FailingTransport final : public headway::sdk::KvTransport {
 public:
  FailingTransport(const headway::sdk::Host&, const headway::sdk::Options&) {}

  uint64_t start(const hw_kv_transfer&) override {
    std::lock_guard lock(mutex_);
    return next_++;
  }

  headway::sdk::TransferProgress poll(uint64_t) override { return {HW_TRANSFER_FAILED, 0.0}; }

 private:
  std::mutex mutex_;
  uint64_t next_ = 1;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(FailingTransport, "org.headway.test.failing_transport", "test_failing",
                            "0.0.1", "Test plugin: every transfer fails", headway::sdk::no_options)
