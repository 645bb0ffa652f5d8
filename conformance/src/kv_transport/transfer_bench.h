// Host-memory KV regions filled with known bytes, and transfers through a transport instance with a
// bounded wait, for the kv-transport profile.
//
// Ownership: a Region owns its bytes. Threading: a Region is used by one thread at a time; the
// transport instance may be shared across threads (its kind's contract).
#pragma once

#include <headway/abi.h>
#include <headway/core/plugin_instances.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace headway::conformance {

class Region {
 public:
  // `blocks` blocks of `block_bytes`, `stride` apart (stride >= block_bytes leaves gaps).
  Region(uint32_t blocks, uint64_t block_bytes, uint64_t stride);
  // Block b gets bytes derived from (tag, b); gaps and the tail get a canary byte.
  void fill(uint64_t tag);
  hw_memory_desc desc();
  // Whether block `b` holds what fill(tag) put in block `source_block`.
  bool block_matches(uint32_t b, uint64_t tag, uint32_t source_block) const;
  // First byte outside blocks `written` that lost its fill(tag) value, or -1.
  int64_t first_clobbered(uint64_t tag, const std::vector<uint32_t>& written) const;
  uint32_t blocks() const { return blocks_; }
  uint64_t bytes() const { return bytes_.size(); }

 private:
  // Writes block_bytes of block `block`'s content for `tag`.
  void pattern(uint64_t tag, uint32_t block, uint8_t* out) const;
  uint32_t blocks_;
  uint64_t block_bytes_;
  uint64_t stride_;
  std::vector<uint8_t> bytes_;
};

struct TransferResult {
  int32_t state = HW_TRANSFER_PENDING;  // DONE, FAILED, or PENDING when the wait ran out
  bool refused = false;                 // start() returned an error
  // start() or poll() answered what abi.h does not define (core::PluginContractError): `error`
  // says what. The transfer counts as FAILED, and a test fails on it whatever it expected.
  bool contract_broken = false;
  std::string error;
  double wall_seconds = 0.0;  // start() to the poll that saw it end
  double reported_seconds = 0.0;
  // Whether the transport is done with the regions: start() refused the transfer with a code abi.h
  // defines, or poll() answered DONE or FAILED. Otherwise (still PENDING when the wait ran out, or
  // an answer the host refused) its worker may still be writing them, and the caller must keep
  // them alive until the instance is destroyed.
  bool settled() const { return !contract_broken && state != HW_TRANSFER_PENDING; }
  // The block lists the transfer named, which abi.h lends until it ends: a caller that keeps the
  // regions of an unsettled transfer keeps this too.
  std::shared_ptr<const void> block_lists;
};

// Starts one transfer between `source` and `destination` and polls it until it ends or `timeout_s`
// passes (50 µs between polls).
TransferResult transfer(core::KvTransportInstance& transport, Region& source, Region& destination,
                        const std::vector<uint32_t>& source_blocks,
                        const std::vector<uint32_t>& destination_blocks, double timeout_s);
// The same for regions described by the caller (simulated memory, HW_MEMORY_NONE); `t`'s block
// lists are set from the two vectors.
TransferResult transfer(core::KvTransportInstance& transport, hw_memory_desc source,
                        hw_memory_desc destination, const std::vector<uint32_t>& source_blocks,
                        const std::vector<uint32_t>& destination_blocks, double timeout_s);

}  // namespace headway::conformance
