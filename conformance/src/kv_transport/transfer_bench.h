// Host-memory KV regions filled with known bytes, and transfers through a transport instance with a
// bounded wait, for the kv-transport profile.
//
// Ownership: a Region owns its bytes. Threading: a Region is used by one thread at a time; the
// transport instance may be shared across threads (its kind's contract).
#pragma once

#include <headway/abi.h>
#include <headway/core/plugin_instances.h>

#include <cstdint>
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
};

// Starts one transfer and polls it until it ends or `timeout_s` passes.
TransferResult transfer(core::KvTransportInstance& transport, Region& source, Region& destination,
                        const std::vector<uint32_t>& source_blocks,
                        const std::vector<uint32_t>& destination_blocks, double timeout_s);

}  // namespace headway::conformance
