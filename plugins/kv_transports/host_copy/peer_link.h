// One host_copy peer link (abi.h, ABI 1.2): KV between two engine processes on one host, through
// the two rings of a SharedLinkMemory. A posted send streams a record — a 16-byte header {magic,
// block count, block bytes} and then the blocks' bytes — into the ring of its rank; the receive
// posted on the other side reads the header, refuses a record that is not the shape it was posted
// for, and copies the bytes into its blocks. Sends and receives are matched in posting order per
// direction, as NCCL's are. Ring bytes are published in batches (kPublishBytes), so the receiver
// copies one batch while the sender fills the next: a transfer larger than the ring streams
// through it.
//
// KV on a GPU (builds with CUDA): the link registers its mapping with cudaHostRegister at join
// (where that is refused, as some sandboxes do for shared mappings, it warns and copies through
// pageable memory), and its threads copy GPU <-> ring with cudaMemcpyAsync on streams of their own.
//
// Failures break the link (a record is half-read, so the streams no longer line up): the transfer
// and every other one queued on it report FAILED, this side is marked closed in the shared header
// so that the other process fails its own at once, and the caller opens another link. Causes: a
// shape mismatch, a CUDA error, the other side closing or its process ending (known only when
// both share a pid namespace: SharedLinkMemory::holder_exited), or a transfer that waits
// timeout_s for the other side to move a byte (a long transfer that keeps moving does not time
// out).
//
// Ownership: owns its SharedLinkMemory, pinned registration and two threads (sender, receiver);
// a posted transfer's memory is touched only until its state leaves PENDING. Destruction closes
// the link: it fails what is still queued, joins the threads (a transfer being copied is finished
// by its own thread, FAILED), and only then unmaps, so no memory is touched afterwards.
// Threading: state(), post() and destruction may be called from any thread, one at a time per
// link (host_copy_transport.cpp holds its mutex around them).
#pragma once

#include <headway/abi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <headway/sdk/host.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shared_link_memory.h"

namespace headway::kv_transports::host_copy {

class ByteMover;
class PinnedRegistration;

struct PostedTransfer {
  // Set at peer_post, then only read.
  hw_peer_direction direction = HW_PEER_SEND;
  hw_memory_desc memory{};
  std::vector<uint32_t> blocks;
  // PENDING until the link's thread (or the link's close) finishes it; `seconds` is written before
  // `state` leaves PENDING (release), so a reader that saw DONE or FAILED (acquire) may read it.
  std::atomic<int32_t> state{HW_TRANSFER_PENDING};
  double seconds = 0.0;
};

class PeerLink {
 public:
  // Bytes copied into (or out of) a ring before they are published to the other side.
  static constexpr uint64_t kPublishBytes = uint64_t{1} << 20;

  // Joins `memory` as `rank` (0 or 1) for KV of `memory_kind` (HW_MEMORY_HOST, or HW_MEMORY_DEVICE
  // on `device_id` in builds with CUDA). Throws sdk::Error when the rank is taken or the rings
  // cannot be pinned. `handle` only names the link in log lines.
  PeerLink(std::unique_ptr<SharedLinkMemory> memory, int rank, int32_t memory_kind,
           int32_t device_id, double timeout_s, const sdk::Host& host, uint64_t handle);
  ~PeerLink();
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  // PENDING until the other rank joined (FAILED when it has not within timeout_s), DONE while
  // up, FAILED once broken.
  hw_transfer_state state();
  // Why the link failed; empty while it has not.
  std::string failure();
  // Queues `transfer`. Throws sdk::Error: HW_UNAVAILABLE when the link is not up,
  // HW_INVALID_ARGUMENT when its memory is not the link's kind or a block lies outside it.
  void post(std::shared_ptr<PostedTransfer> transfer);

 private:
  struct Cursor;

  void run(hw_peer_direction direction);
  std::unique_ptr<ByteMover> make_mover() const;
  std::string send(const PostedTransfer& transfer, ByteMover& mover, Cursor& cursor);
  std::string receive(const PostedTransfer& transfer, ByteMover& mover, Cursor& cursor);
  std::string stream(unsigned char* local, uint64_t bytes, ByteMover* mover, ByteMover& flusher,
                     Cursor& cursor);
  std::string publish(ByteMover& mover, Cursor& cursor);
  template <class Ready>
  std::string wait_until(int ring, Ready&& ready);
  std::string stop_reason(std::chrono::steady_clock::time_point waiting_since);
  std::string peer_gone_reason() const;
  void fail(const std::string& why);
  void finish(PostedTransfer& transfer, hw_transfer_state state, double seconds);

  const int rank_;
  const int32_t memory_kind_;
  const int32_t device_id_;
  const std::chrono::steady_clock::duration timeout_;
  const std::chrono::steady_clock::time_point join_deadline_;
  const sdk::Host host_;
  const uint64_t handle_;
  std::unique_ptr<SharedLinkMemory> memory_;
  std::unique_ptr<PinnedRegistration> pinned_;  // KV on a GPU only

  std::mutex mutex_;
  std::atomic<bool> closing_{false};
  std::string failure_;                                    // guarded by mutex_
  std::deque<std::shared_ptr<PostedTransfer>> queued_[2];  // by direction; guarded by mutex_
  std::thread threads_[2];                                 // by direction
};

// Why `memory` and `blocks` cannot be posted on a link joined for `link_kind` on `link_device`
// (another kind or device, no base, blocks of 0 bytes, a stride below the block size, a block
// beyond the region); empty when they can.
std::string peer_post_problem(const hw_memory_desc& memory, const uint32_t* blocks,
                              uint32_t block_count, int32_t link_kind, int32_t link_device);

}  // namespace headway::kv_transports::host_copy
