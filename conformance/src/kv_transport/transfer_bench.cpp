#include "transfer_bench.h"

#include <headway/core/error.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

namespace headway::conformance {
namespace {

constexpr uint8_t kCanary = 0xA5;

}  // namespace

Region::Region(uint32_t blocks, uint64_t block_bytes, uint64_t stride)
    : blocks_(blocks), block_bytes_(block_bytes), stride_(stride), bytes_(blocks * stride) {}

void Region::pattern(uint64_t tag, uint32_t block, uint8_t* out) const {
  // One splitmix64 word per 8 bytes: differs between blocks, tags and offsets, so a misplaced or
  // shifted copy shows, and is cheap enough for 256 MiB.
  for (uint64_t w = 0; w * 8 < block_bytes_; ++w) {
    uint64_t x = (tag * 0x9E3779B97F4A7C15ULL) ^ (uint64_t{block} << 40) ^ w;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    std::memcpy(out + w * 8, &x, std::min<uint64_t>(8, block_bytes_ - w * 8));
  }
}

void Region::fill(uint64_t tag) {
  std::fill(bytes_.begin(), bytes_.end(), kCanary);
  for (uint32_t b = 0; b < blocks_; ++b) pattern(tag, b, bytes_.data() + b * stride_);
}

hw_memory_desc Region::desc() {
  return hw_memory_desc{bytes_.data(), bytes_.size(), HW_MEMORY_HOST, -1, block_bytes_, stride_};
}

bool Region::block_matches(uint32_t b, uint64_t tag, uint32_t source_block) const {
  std::vector<uint8_t> expected(block_bytes_);
  pattern(tag, source_block, expected.data());
  return std::memcmp(bytes_.data() + b * stride_, expected.data(), block_bytes_) == 0;
}

int64_t Region::first_clobbered(uint64_t tag, const std::vector<uint32_t>& written) const {
  std::vector<uint8_t> expected(stride_, kCanary);
  for (uint32_t b = 0; b < blocks_; ++b) {
    const bool was_written = std::find(written.begin(), written.end(), b) != written.end();
    std::fill(expected.begin(), expected.end(), kCanary);
    if (!was_written) pattern(tag, b, expected.data());
    const uint8_t* actual = bytes_.data() + b * stride_;
    // A written block's payload is checked by block_matches; here only its gap.
    const uint64_t from = was_written ? block_bytes_ : 0;
    for (uint64_t i = from; i < stride_; ++i) {
      if (actual[i] != expected[i]) return static_cast<int64_t>(b * stride_ + i);
    }
  }
  return -1;
}

TransferResult transfer(core::KvTransportInstance& transport, Region& source, Region& destination,
                        const std::vector<uint32_t>& source_blocks,
                        const std::vector<uint32_t>& destination_blocks, double timeout_s) {
  return transfer(transport, source.desc(), destination.desc(), source_blocks, destination_blocks,
                  timeout_s);
}

TransferResult transfer(core::KvTransportInstance& transport, hw_memory_desc source,
                        hw_memory_desc destination, const std::vector<uint32_t>& source_blocks,
                        const std::vector<uint32_t>& destination_blocks, double timeout_s) {
  TransferResult result;
  // The transport may read the lists until the transfer ends, which may be after the wait.
  const auto lists =
      std::make_shared<const std::pair<std::vector<uint32_t>, std::vector<uint32_t>>>(
          source_blocks, destination_blocks);
  result.block_lists = lists;
  hw_kv_transfer t{};
  t.struct_size = sizeof(hw_kv_transfer);
  t.request_id = 1;
  t.source = source;
  t.destination = destination;
  t.source_blocks = lists->first.data();
  t.destination_blocks = lists->second.data();
  t.block_count = static_cast<uint32_t>(source_blocks.size());
  t.source_engine = 0;
  t.destination_engine = 1;
  const auto begin = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  uint64_t handle = 0;
  try {
    handle = transport.start(t);
  } catch (const core::Error& e) {
    result.contract_broken = dynamic_cast<const core::PluginContractError*>(&e) != nullptr;
    result.refused = true;
    result.state = HW_TRANSFER_FAILED;
    result.error = e.what();
    return result;
  }
  // Bounded wait: a transport that never finishes shows as PENDING, not as a hung suite.
  while (elapsed() < timeout_s) {
    try {
      const core::KvTransportInstance::Progress p = transport.poll(handle);
      if (p.state != HW_TRANSFER_PENDING) {
        result.state = p.state;
        result.reported_seconds = p.seconds;
        break;
      }
    } catch (const core::Error& e) {
      result.contract_broken = dynamic_cast<const core::PluginContractError*>(&e) != nullptr;
      result.state = HW_TRANSFER_FAILED;
      result.error = e.what();
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  result.wall_seconds = elapsed();
  return result;
}

}  // namespace headway::conformance
