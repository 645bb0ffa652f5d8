// Faulty on purpose: copies each block through a staging buffer of 1 MiB and copies no more than
// fits, reporting DONE. Every block of the v1 suite (at most 1 MiB) arrives whole; a real model's
// block is bigger (Llama-3.1-8B's 16-token block is 2 MiB, a 70B model's at tp 1 is 5 MiB), and
// its tail would reach the decode engine as whatever those bytes held before. The suite must report
// kv.large_blocks as FAIL.
#include <headway/plugin.hpp>

#include "finished_transfers.h"
#include "host_block_copy.h"

namespace {

class BounceTransport final : public headway::sdk::KvTransport {
 public:
  BounceTransport(const headway::sdk::Host&, const headway::sdk::Options&) {}

  uint64_t start(const hw_kv_transfer& t) override {
    // The fault: a block larger than the 1 MiB staging buffer it was copied through loses its tail.
    return finished_.add(headway::faulty::copy_host_blocks(t, uint64_t{1} << 20));
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    return {finished_.take(handle) ? HW_TRANSFER_DONE : HW_TRANSFER_FAILED, 1e-3};
  }

 private:
  FinishedTransfers finished_;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(BounceTransport, "org.headway.faulty.bounce_transport", "faulty_bounce",
                            "0.0.1", "Faulty on purpose: truncates blocks larger than 1 MiB",
                            headway::sdk::no_options)
