// Faulty on purpose: copies each block through a staging buffer of 1 MiB and copies no more than
// fits, reporting DONE. Every block of the v1 suite (at most 1 MiB) arrives whole; a real model's
// block is bigger (Llama-3.1-8B's 16-token block is 2 MiB, a 70B model's at tp 1 is 5 MiB), and
// its tail would reach the decode engine as whatever those bytes held before. The suite must report
// kv.large_blocks as FAIL.
#include <algorithm>
#include <cstring>
#include <headway/plugin.hpp>
#include <vector>

#include "finished_transfers.h"

namespace {

class BounceTransport final : public headway::sdk::KvTransport {
 public:
  BounceTransport(const headway::sdk::Host&, const headway::sdk::Options&) {}

  uint64_t start(const hw_kv_transfer& t) override {
    bool ok = true;
    if (t.source.kind == HW_MEMORY_HOST && t.destination.kind == HW_MEMORY_HOST) {
      const auto* src = static_cast<const unsigned char*>(t.source.base);
      auto* dst = static_cast<unsigned char*>(t.destination.base);
      std::vector<unsigned char> staging(1 << 20);  // per call: start() may run on many threads
      for (uint32_t i = 0; i < t.block_count; ++i) {
        const uint64_t from = t.source_blocks[i] * t.source.block_stride;
        const uint64_t to = t.destination_blocks[i] * t.destination.block_stride;
        if (from + t.source.block_bytes > t.source.bytes ||
            to + t.source.block_bytes > t.destination.bytes) {
          ok = false;
          break;
        }
        // The fault: a block larger than the staging buffer loses its tail.
        const size_t bytes = std::min<size_t>(t.source.block_bytes, staging.size());
        std::memcpy(staging.data(), src + from, bytes);
        std::memcpy(dst + to, staging.data(), bytes);
      }
    }
    return finished_.add(ok);
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
