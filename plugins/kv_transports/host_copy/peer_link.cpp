#include "peer_link.h"

#include <algorithm>
#include <cstdio>
#include <headway/sdk/kv_transport.hpp>
#include <headway/sdk/status.hpp>
#include <utility>

#include "byte_mover.h"

#if HEADWAY_HOST_COPY_CUDA
#include "device_copy.h"
#endif

namespace headway::kv_transports::host_copy {

#if !HEADWAY_HOST_COPY_CUDA
// Without CUDA nothing is pinned (device memory is refused at join); the type only completes
// PeerLink's member.
class PinnedRegistration {};
#endif

namespace {

using sdk::Error;
using Clock = std::chrono::steady_clock;

// How long a waiting thread sleeps before it looks at the other process, the deadline and a close
// again, when no wake comes.
constexpr std::chrono::milliseconds kWaitSlice{50};

constexpr uint32_t kRecordMagic = 0x4b564852;  // "RHVK"

// What a send writes before its blocks; the receive checks it against what it was posted for.
struct RecordHeader {
  uint32_t magic;
  uint32_t block_count;
  uint64_t block_bytes;
};
static_assert(sizeof(RecordHeader) == 16);

std::string seconds_text(std::chrono::steady_clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", std::chrono::duration<double>(d).count());
  return text;
}

const char* direction_name(hw_peer_direction direction) {
  return direction == HW_PEER_SEND ? "send" : "receive";
}

unsigned char* block_address(const hw_memory_desc& memory, uint32_t block) {
  return static_cast<unsigned char*>(memory.base) + uint64_t{block} * memory.block_stride;
}

}  // namespace

// Where a thread is in its ring: `position` counts the bytes it copied, `published` those the
// other side may see.
struct PeerLink::Cursor {
  int ring = 0;
  bool sending = false;
  uint64_t position = 0;
  uint64_t published = 0;
};

std::string peer_post_problem(const hw_memory_desc& memory, const uint32_t* blocks,
                              uint32_t block_count, int32_t link_kind, int32_t link_device) {
  if (memory.kind != link_kind) {
    return "memory of kind " + std::to_string(memory.kind) + " on a link joined for kind " +
           std::to_string(link_kind) + " (0 host, 1 device)";
  }
  if (link_kind == HW_MEMORY_DEVICE && memory.device_id != link_device) {
    return "memory on device " + std::to_string(memory.device_id) +
           " on a link joined for device " + std::to_string(link_device);
  }
  if (memory.base == nullptr) return "memory.base is null";
  if (memory.block_bytes == 0) return "memory.block_bytes is 0";
  if (memory.block_stride < memory.block_bytes) {
    return "memory.block_stride " + std::to_string(memory.block_stride) + " < block_bytes " +
           std::to_string(memory.block_bytes);
  }
  if (block_count > 0 && blocks == nullptr) return "blocks is null";
  for (uint32_t i = 0; i < block_count; ++i) {
    if (!sdk::block_in_region(memory, blocks[i])) {
      return "blocks[" + std::to_string(i) + "] = " + std::to_string(blocks[i]) +
             " lies beyond memory.bytes " + std::to_string(memory.bytes) + " (block_bytes " +
             std::to_string(memory.block_bytes) + ", stride " +
             std::to_string(memory.block_stride) + ")";
    }
  }
  return {};
}

PeerLink::PeerLink(std::unique_ptr<SharedLinkMemory> memory, int rank, int32_t memory_kind,
                   int32_t device_id, double timeout_s, const sdk::Host& host, uint64_t handle)
    : rank_(rank),
      memory_kind_(memory_kind),
      device_id_(device_id),
      timeout_(
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))),
      join_deadline_(Clock::now() + timeout_),
      host_(host),
      handle_(handle),
      memory_(std::move(memory)) {
  if (memory_kind_ == HW_MEMORY_DEVICE) {
#if HEADWAY_HOST_COPY_CUDA
    pinned_ = std::make_unique<PinnedRegistration>(memory_->mapping(), memory_->mapping_bytes(),
                                                   device_id_);
    if (!pinned_->error().empty() && !pinned_->register_refused()) {
      throw Error(HW_UNAVAILABLE, "host_copy: cannot pin the rings of link " + memory_->name() +
                                      ": " + pinned_->error());
    }
    if (!pinned_->error().empty()) {
      // Copies between a GPU and pageable memory still work (the driver stages them), only
      // slower: some sandboxes refuse to pin a shared mapping, and a slower link beats none.
      host_.log(HW_LOG_WARN, "host_copy: cannot pin the rings of link " + memory_->name() + ": " +
                                 pinned_->error() +
                                 "; its GPU copies use pageable memory (slower, not overlapped)");
      host_.counter_add("host_copy_pageable_links", 1.0);
      pinned_.reset();
    } else {
      host_.counter_add("host_copy_pinned_links", 1.0);
    }
#else
    throw Error(HW_UNIMPLEMENTED,
                "host_copy: peer links for KV in device memory need a build of the plugin with "
                "CUDA (configure with HEADWAY_CUDA=ON)");
#endif
  }
  if (!memory_->claim(rank_)) {
    throw Error(HW_FAILED_PRECONDITION, "host_copy: rank " + std::to_string(rank_) + " of link " +
                                            memory_->name() + " is already held by pid " +
                                            std::to_string(memory_->holder(rank_)));
  }
  // The second rank to join removes the name: both sides have it mapped, and nothing is left in
  // /dev/shm whatever happens to the processes later.
  if (memory_->holder(1 - rank_) != 0) memory_->unlink();
  threads_[HW_PEER_SEND] = std::thread([this] { run(HW_PEER_SEND); });
  try {
    threads_[HW_PEER_RECEIVE] = std::thread([this] { run(HW_PEER_RECEIVE); });
  } catch (...) {
    closing_.store(true);
    memory_->wake(rank_);
    threads_[HW_PEER_SEND].join();
    memory_->close_side(rank_);
    throw;
  }
}

PeerLink::~PeerLink() {
  closing_.store(true);
  memory_->wake(0);
  memory_->wake(1);
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  {
    std::lock_guard lock(mutex_);
    for (auto& queue : queued_) {
      for (const auto& transfer : queue) finish(*transfer, HW_TRANSFER_FAILED, 0.0);
      queue.clear();
    }
  }
  memory_->close_side(rank_);
  // Nobody joined the other rank: nobody else will remove the name.
  if (memory_->holder(1 - rank_) == 0) memory_->unlink();
  pinned_.reset();  // before the mapping goes
}

std::string PeerLink::failure() {
  std::lock_guard lock(mutex_);
  return failure_;
}

hw_transfer_state PeerLink::state() {
  if (!failure().empty()) return HW_TRANSFER_FAILED;
  if (memory_->holder(1 - rank_) == 0) {
    if (memory_->side_closed(1 - rank_)) {
      fail("the other side closed the link before joining it");
      return HW_TRANSFER_FAILED;
    }
    if (Clock::now() > join_deadline_) {
      fail("the other side did not join within peer_link_timeout_s = " + seconds_text(timeout_) +
           " s");
      return HW_TRANSFER_FAILED;
    }
    return HW_TRANSFER_PENDING;
  }
  std::string why = memory_->side_closed(1 - rank_)
                        ? "the other process closed its side of the link"
                        : peer_gone_reason();
  if (why.empty()) return HW_TRANSFER_DONE;
  // Bytes the other side sent before it left are still there for this side's receives: the
  // link serves them (a receive that needs more fails when it finds none).
  if (memory_->written(1 - rank_).load(std::memory_order_acquire) !=
      memory_->consumed(1 - rank_).load(std::memory_order_acquire)) {
    return HW_TRANSFER_DONE;
  }
  fail(why);
  return HW_TRANSFER_FAILED;
}

void PeerLink::post(std::shared_ptr<PostedTransfer> transfer) {
  const hw_transfer_state now = state();
  if (now != HW_TRANSFER_DONE) {
    throw Error(HW_UNAVAILABLE, "host_copy: peer_post: link " + std::to_string(handle_) +
                                    (now == HW_TRANSFER_PENDING ? " is still joining"
                                                                : " has failed: " + failure()));
  }
  if (const std::string problem = peer_post_problem(transfer->memory, transfer->blocks.data(),
                                                    static_cast<uint32_t>(transfer->blocks.size()),
                                                    memory_kind_, device_id_);
      !problem.empty()) {
    throw Error(HW_INVALID_ARGUMENT, "host_copy: peer_post: " + problem);
  }
  const hw_peer_direction direction = transfer->direction;
  {
    std::lock_guard lock(mutex_);
    // Failed since state() looked: the threads are gone, and nothing would finish it.
    if (!failure_.empty()) {
      throw Error(HW_UNAVAILABLE, "host_copy: peer_post: link " + std::to_string(handle_) +
                                      " has failed: " + failure_);
    }
    queued_[direction].push_back(std::move(transfer));
  }
  memory_->wake(direction == HW_PEER_SEND ? rank_ : 1 - rank_);
}

std::unique_ptr<ByteMover> PeerLink::make_mover() const {
#if HEADWAY_HOST_COPY_CUDA
  if (memory_kind_ == HW_MEMORY_DEVICE) return make_device_byte_mover(device_id_);
#endif
  return std::make_unique<HostByteMover>();
}

void PeerLink::run(hw_peer_direction direction) {
  const bool sending = direction == HW_PEER_SEND;
  Cursor cursor;
  cursor.ring = sending ? rank_ : 1 - rank_;
  cursor.sending = sending;
  // This thread is the only writer of its cursor in the shared header.
  cursor.position =
      sending ? memory_->written(cursor.ring).load() : memory_->consumed(cursor.ring).load();
  cursor.published = cursor.position;
  const std::unique_ptr<ByteMover> mover = make_mover();
  while (!closing_.load()) {
    const uint32_t seen = memory_->wake_value(cursor.ring);
    std::shared_ptr<PostedTransfer> transfer;
    {
      std::lock_guard lock(mutex_);
      if (!failure_.empty()) return;
      if (!queued_[direction].empty()) {
        transfer = std::move(queued_[direction].front());
        queued_[direction].pop_front();
      }
    }
    if (transfer == nullptr) {
      memory_->wait(cursor.ring, seen, kWaitSlice);
      continue;
    }
    const auto begin = Clock::now();
    const std::string error =
        sending ? send(*transfer, *mover, cursor) : receive(*transfer, *mover, cursor);
    const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    if (error.empty()) {
      finish(*transfer, HW_TRANSFER_DONE, seconds);
      continue;
    }
    // Copies the transfer queued since its last publish may still be landing in (or reading) its
    // blocks: they finish before it reports FAILED and its memory goes back to the caller.
    (void)mover->finish();
    // The link fails (and the other side is told) before the transfer reports FAILED, so that a
    // caller who saw the failure finds the link broken too.
    fail(std::string(direction_name(direction)) + " of " + std::to_string(transfer->blocks.size()) +
         " blocks failed: " + error);
    finish(*transfer, HW_TRANSFER_FAILED, seconds);
    return;
  }
}

std::string PeerLink::send(const PostedTransfer& transfer, ByteMover& mover, Cursor& cursor) {
  RecordHeader header{kRecordMagic, static_cast<uint32_t>(transfer.blocks.size()),
                      transfer.memory.block_bytes};
  HostByteMover memcpy_mover;
  std::string error = stream(reinterpret_cast<unsigned char*>(&header), sizeof header,
                             &memcpy_mover, mover, cursor);
  for (size_t i = 0; error.empty() && i < transfer.blocks.size(); ++i) {
    error = stream(block_address(transfer.memory, transfer.blocks[i]), transfer.memory.block_bytes,
                   &mover, mover, cursor);
  }
  return error.empty() ? publish(mover, cursor) : error;
}

std::string PeerLink::receive(const PostedTransfer& transfer, ByteMover& mover, Cursor& cursor) {
  RecordHeader header{};
  HostByteMover memcpy_mover;
  std::string error = stream(reinterpret_cast<unsigned char*>(&header), sizeof header,
                             &memcpy_mover, mover, cursor);
  if (!error.empty()) return error;
  if (header.magic != kRecordMagic) {
    return "the ring holds no record header where one should begin (the streams are out of step)";
  }
  if (header.block_count != transfer.blocks.size() ||
      header.block_bytes != transfer.memory.block_bytes) {
    return "the other side sent " + std::to_string(header.block_count) + " blocks of " +
           std::to_string(header.block_bytes) + " bytes where this receive was posted for " +
           std::to_string(transfer.blocks.size()) + " of " +
           std::to_string(transfer.memory.block_bytes);
  }
  for (size_t i = 0; error.empty() && i < transfer.blocks.size(); ++i) {
    error = stream(block_address(transfer.memory, transfer.blocks[i]), transfer.memory.block_bytes,
                   &mover, mover, cursor);
  }
  return error.empty() ? publish(mover, cursor) : error;
}

// Moves `bytes` between `local` and the ring through `mover`: into the ring as space frees up
// when the cursor sends, out of it as the other side publishes them when it receives. `flusher` is
// the mover whose queued copies must land before bytes are published (the block mover: a header's
// memcpy has landed already).
std::string PeerLink::stream(unsigned char* local, uint64_t bytes, ByteMover* mover,
                             ByteMover& flusher, Cursor& cursor) {
  const uint64_t ring_bytes = memory_->ring_bytes();
  // What this thread may move now: free space to fill, or published bytes to read.
  const auto movable = [&]() -> uint64_t {
    if (cursor.sending) {
      return ring_bytes -
             (cursor.position - memory_->consumed(cursor.ring).load(std::memory_order_acquire));
    }
    return memory_->written(cursor.ring).load(std::memory_order_acquire) - cursor.position;
  };
  while (bytes > 0) {
    if (closing_.load()) return "the link was closed";
    const uint64_t ready = movable();
    if (ready == 0) {
      if (std::string e = publish(flusher, cursor); !e.empty()) return e;
      std::string why = wait_until(cursor.ring, [&] { return movable() > 0; });
      if (!why.empty()) return why;
      continue;
    }
    const uint64_t offset = cursor.position % ring_bytes;
    const uint64_t n = std::min({bytes, ready, ring_bytes - offset});
    unsigned char* slot = memory_->ring(cursor.ring) + offset;
    std::string e = cursor.sending ? mover->copy(slot, local, n) : mover->copy(local, slot, n);
    if (!e.empty()) return e;
    cursor.position += n;
    local += n;
    bytes -= n;
    if (cursor.position - cursor.published >= kPublishBytes) {
      if (std::string e = publish(flusher, cursor); !e.empty()) return e;
    }
  }
  return {};
}

// Lets the other side see this thread's progress once every queued copy has landed.
std::string PeerLink::publish(ByteMover& mover, Cursor& cursor) {
  if (cursor.position == cursor.published) return {};
  if (std::string e = mover.finish(); !e.empty()) return e;
  std::atomic<uint64_t>& counter =
      cursor.sending ? memory_->written(cursor.ring) : memory_->consumed(cursor.ring);
  counter.store(cursor.position, std::memory_order_release);
  cursor.published = cursor.position;
  memory_->wake(cursor.ring);
  return {};
}

template <class Ready>
std::string PeerLink::wait_until(int ring, Ready&& ready) {
  // The timeout counts from here: a transfer may take as long as it needs while bytes move, and
  // fails only when the other side moves none for timeout_ (it stopped reading, or never posted).
  const Clock::time_point waiting_since = Clock::now();
  for (;;) {
    const uint32_t seen = memory_->wake_value(ring);
    if (ready()) return {};
    if (std::string why = stop_reason(waiting_since); !why.empty()) {
      // The other side publishes its last bytes before it marks its side closed: seen closed,
      // those bytes are visible now.
      return ready() ? std::string() : why;
    }
    memory_->wait(ring, seen, kWaitSlice);
  }
}

std::string PeerLink::stop_reason(Clock::time_point waiting_since) {
  if (closing_.load()) return "the link was closed";
  if (std::string why = failure(); !why.empty()) return "the link failed: " + why;
  if (memory_->side_closed(1 - rank_)) return "the other process closed its side of the link";
  if (std::string why = peer_gone_reason(); !why.empty()) return why;
  if (Clock::now() - waiting_since > timeout_) {
    return "the other side moved no bytes for peer_link_timeout_s = " + seconds_text(timeout_) +
           " s";
  }
  return {};
}

std::string PeerLink::peer_gone_reason() const {
  // In another pid namespace the holder cannot be known gone: the other side's close and the
  // timeout are what tell there.
  if (!memory_->holder_exited(1 - rank_)) return {};
  return "the other process (pid " + std::to_string(memory_->holder(1 - rank_)) + ") is gone";
}

void PeerLink::fail(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_.empty()) return;
    failure_ = why;
    for (auto& queue : queued_) {
      for (const auto& transfer : queue) finish(*transfer, HW_TRANSFER_FAILED, 0.0);
      queue.clear();
    }
  }
  host_.log(HW_LOG_WARN, "host_copy: peer link " + std::to_string(handle_) + " (" +
                             memory_->name() + ", rank " + std::to_string(rank_) +
                             ") failed: " + why);
  // The other process fails its transfers at once instead of at its timeout.
  memory_->close_side(rank_);
}

void PeerLink::finish(PostedTransfer& transfer, hw_transfer_state state, double seconds) {
  transfer.seconds = seconds;
  transfer.state.store(state, std::memory_order_release);
}

}  // namespace headway::kv_transports::host_copy
