// The POSIX shared-memory object behind one host_copy peer link between two processes on one host:
// a header of atomics and two byte rings, one per direction (ring r carries what rank r sends).
// A sender copies bytes into its ring and publishes how far it has written; the receiver copies
// them out and publishes how far it has read; each waits for the other on a futex in the header
// (shared between processes, so never FUTEX_PRIVATE). The object is named
// "/headway-kvlink-<pid namespace>-<pid>-<16 hex digits>" (that name is the link's rendezvous id;
// sdk/shm_owner.hpp); the second rank to join removes the name, so a link leaves nothing in
// /dev/shm once both sides have it mapped, and remove_orphans() takes what a crash left before.
//
// With KV on a GPU the rings are registered with cudaHostRegister by each process (peer_link.h),
// which makes them shared *pinned* memory: GPU -> ring -> GPU at DMA speed, with no per-transfer
// object, mapping or page fault.
//
// Ownership: owns its mapping (unmapped at destruction); the name is removed by unlink() only.
// Threading: the accessors are lock-free atomics and may be used from any thread of either process;
// create/open/destruction by one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace headway::kv_transports::host_copy {

inline constexpr char kLinkObjectPrefix[] = "/headway-kvlink-";

class SharedLinkMemory {
 public:
  // Makes a new object with two rings of `ring_bytes` (a multiple of 4096) each. Throws
  // sdk::Error naming the object when it cannot (no space in /dev/shm).
  static std::unique_ptr<SharedLinkMemory> create(uint64_t ring_bytes);
  // Maps an object create() made, in this process or another of this user on this host. Throws
  // sdk::Error (HW_INVALID_ARGUMENT for a name that is not a link's, HW_NOT_FOUND when it is gone
  // or on another host, HW_FAILED_PRECONDITION for another user's or a damaged one) naming it and
  // what is wrong.
  static std::unique_ptr<SharedLinkMemory> open(const std::string& name);

  ~SharedLinkMemory();
  SharedLinkMemory(const SharedLinkMemory&) = delete;
  SharedLinkMemory& operator=(const SharedLinkMemory&) = delete;

  const std::string& name() const { return name_; }
  // Removes the name (the mappings stay valid); harmless when it is already gone.
  void unlink() const noexcept;
  // Removes the object called `name` if it is a link object's name; harmless when it is gone.
  static void remove_name(const std::string& name) noexcept;
  // Removes the link objects of processes that exited before anyone joined them (a crash between
  // create() and the other side's join). Returns how many.
  static size_t remove_orphans() noexcept;

  // Takes `rank` (0 or 1) for this process; false when a process already holds it.
  bool claim(int rank);
  // The pid that holds `rank`, 0 while nobody does.
  int32_t holder(int rank) const;
  // Whether the process holding `rank` is known to have exited (sdk::shm_owner_exited: only a
  // holder in this process's pid namespace can be known so; two containers may share /dev/shm,
  // not pids).
  bool holder_exited(int rank) const;
  // Marks `rank`'s side closed (it left, or failed the link) and wakes both rings' waiters.
  void close_side(int rank);
  bool side_closed(int rank) const;

  uint64_t ring_bytes() const { return ring_bytes_; }
  unsigned char* ring(int rank) const;  // the ring rank sends on
  // Bytes published into / read out of ring `rank` since the link began (monotonic).
  std::atomic<uint64_t>& written(int rank) const;
  std::atomic<uint64_t>& consumed(int rank) const;

  // The waiting protocol of ring `rank`: read wake_value(), check the condition, then wait(seen)
  // until the value changed or `timeout` passed. wake() follows every change the other side may
  // wait for (and local events: a new post, a close).
  uint32_t wake_value(int rank) const;
  void wake(int rank) const;
  void wait(int rank, uint32_t seen, std::chrono::milliseconds timeout) const;

  // The whole mapping (for cudaHostRegister).
  void* mapping() const { return mapping_; }
  size_t mapping_bytes() const { return mapping_bytes_; }

 private:
  SharedLinkMemory(std::string name, void* mapping, size_t mapping_bytes);
  struct Header;
  // Where ring 0 begins: the header rounded up to a page.
  static uint64_t data_offset();
  Header& header() const { return *static_cast<Header*>(mapping_); }

  std::string name_;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  uint64_t ring_bytes_ = 0;
};

// Why `name` cannot be a link object's name (wrong prefix, characters outside [0-9a-z-], too
// long); empty when it can.
std::string link_name_problem(const std::string& name);

}  // namespace headway::kv_transports::host_copy
