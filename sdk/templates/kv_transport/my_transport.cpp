// A KV transport template: copies host-memory blocks synchronously inside start() and reports the
// result at the next poll(); simulated regions (HW_MEMORY_NONE) get a modelled duration. Copy this
// folder, rename, and make start() hand the copy to your link (RDMA, NVLink, …).
// Check it with: headway-conformance --plugin build/my_transport.so
#include <chrono>
#include <cstring>
#include <headway/plugin.hpp>
#include <mutex>
#include <unordered_map>

namespace {

constexpr double kModelledBytesPerSecond = 10e9;  // for simulated regions only

class MyTransport final : public headway::sdk::KvTransport {
 public:
  MyTransport(const headway::sdk::Host&, const headway::sdk::Options&) {}

  uint64_t start(const hw_kv_transfer& t) override {
    headway::sdk::TransferProgress result{HW_TRANSFER_DONE, 0.0};
    const double bytes = static_cast<double>(t.block_count) * t.source.block_bytes;
    if (t.source.kind == HW_MEMORY_NONE && t.destination.kind == HW_MEMORY_NONE) {
      result.seconds = 1e-5 + bytes / kModelledBytesPerSecond;
    } else if (t.source.kind == HW_MEMORY_NONE || t.destination.kind == HW_MEMORY_NONE) {
      // One side has bytes, the other none: answering DONE would leave the destination's blocks
      // as they were while its engine reads them as this request's KV.
      throw headway::sdk::Error(HW_INVALID_ARGUMENT, "my_transport: one region is simulated");
    } else if (t.source.kind == HW_MEMORY_HOST && t.destination.kind == HW_MEMORY_HOST) {
      const auto begin = std::chrono::steady_clock::now();
      result.state = copy(t) ? HW_TRANSFER_DONE : HW_TRANSFER_FAILED;
      result.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    } else {
      throw headway::sdk::Error(HW_UNIMPLEMENTED, "my_transport copies host memory only");
    }
    // Any thread may call start() and poll(): the table of results is locked.
    std::lock_guard lock(mutex_);
    results_[next_] = result;
    return next_++;
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    std::lock_guard lock(mutex_);
    auto it = results_.find(handle);
    if (it == results_.end()) throw headway::sdk::Error(HW_NOT_FOUND, "unknown transfer handle");
    const headway::sdk::TransferProgress result = it->second;
    results_.erase(it);  // reported once, then forgotten
    return result;
  }

 private:
  // Bounds are checked before every block: a bad block list must give FAILED, never a crash.
  // block_in_region() computes no product that can overflow (block * stride wraps around for a
  // large block id or stride, and a hand-written check would then pass a block outside the region).
  static bool copy(const hw_kv_transfer& t) {
    if (t.source.block_bytes != t.destination.block_bytes) return false;
    const auto* src = static_cast<const unsigned char*>(t.source.base);
    auto* dst = static_cast<unsigned char*>(t.destination.base);
    for (uint32_t i = 0; i < t.block_count; ++i) {
      if (!headway::sdk::block_in_region(t.source, t.source_blocks[i]) ||
          !headway::sdk::block_in_region(t.destination, t.destination_blocks[i])) {
        return false;
      }
      std::memcpy(dst + t.destination_blocks[i] * t.destination.block_stride,
                  src + t.source_blocks[i] * t.source.block_stride, t.source.block_bytes);
    }
    return true;
  }

  std::mutex mutex_;
  std::unordered_map<uint64_t, headway::sdk::TransferProgress> results_;
  uint64_t next_ = 1;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(MyTransport, "com.example.kv_transport.mine", "my_transport", "0.1.0",
                            "Template transport: synchronous host copies", headway::sdk::no_options)
