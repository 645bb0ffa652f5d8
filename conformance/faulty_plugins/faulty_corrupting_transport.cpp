// Faulty on purpose: copies blocks synchronously, then flips one byte of the first block it wrote.
// The suite's byte-exact round trips must report it (kv.one_block, kv.many_blocks, …).
#include <headway/plugin.hpp>

#include "finished_transfers.h"
#include "host_block_copy.h"

namespace {

class CorruptingTransport final : public headway::sdk::KvTransport {
 public:
  CorruptingTransport(const headway::sdk::Host&, const headway::sdk::Options&) {}

  uint64_t start(const hw_kv_transfer& t) override {
    const bool ok = headway::faulty::copy_host_blocks(t);
    if (ok && t.block_count > 0 && t.destination.kind == HW_MEMORY_HOST) {
      auto* dst = static_cast<unsigned char*>(t.destination.base);
      dst[t.destination_blocks[0] * t.destination.block_stride + t.source.block_bytes / 2] ^= 1;
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

HEADWAY_EXPORT_KV_TRANSPORT(CorruptingTransport, "org.headway.faulty.corrupting_transport",
                            "faulty_corrupting", "0.0.1",
                            "Faulty on purpose: flips one byte per transfer",
                            headway::sdk::no_options)
