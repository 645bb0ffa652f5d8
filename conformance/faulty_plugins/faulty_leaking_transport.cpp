// Faulty on purpose: right synchronous copies, keeping a 4 KiB "work request descriptor" per
// start() that it never frees (a third-party author's "ring" transport did). Every round trip
// passes; the headway-conformance child ends with _exit, so LeakSanitizer never runs there (and the
// descriptors stay reachable, so it would not report them anyway): kv.per_transfer_heap must FAIL.
#include <headway/plugin.hpp>
#include <memory>
#include <mutex>
#include <vector>

#include "finished_transfers.h"
#include "host_block_copy.h"

namespace {

class LeakingTransport final : public headway::sdk::KvTransport {
 public:
  LeakingTransport(const headway::sdk::Host&, const headway::sdk::Options&) {}

  uint64_t start(const hw_kv_transfer& t) override {
    {
      std::lock_guard lock(mutex_);
      descriptors_.push_back(std::make_unique<char[]>(4096));
    }
    return finished_.add(headway::faulty::copy_host_blocks(t));
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    return {finished_.take(handle) ? HW_TRANSFER_DONE : HW_TRANSFER_FAILED, 1e-3};
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<char[]>> descriptors_;  // one per start(), never dropped
  FinishedTransfers finished_;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(LeakingTransport, "org.headway.faulty.leaking_transport",
                            "faulty_leaking_transport", "0.0.1",
                            "Faulty on purpose: keeps 4 KiB per transfer", headway::sdk::no_options)
