// host_copy's path for KV in GPU memory (built only with CUDA): blocks move with cudaMemcpyAsync
// on a dedicated non-blocking stream per device, so the copies never wait behind (or stall) the
// model's own streams; between two GPUs they go through a pinned host buffer (device -> pinned
// host -> device, in pieces of at most the buffer's size), which needs no peer access between
// the devices.
//
// Ownership: owns its streams and the pinned buffer, released at destruction.
// Threading: one thread at a time (host_copy's worker thread).
#pragma once

#include <headway/abi.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "byte_mover.h"

struct CUstream_st;

namespace headway::kv_transports::host_copy {

class DeviceCopier {
 public:
  DeviceCopier() = default;
  ~DeviceCopier();
  DeviceCopier(const DeviceCopier&) = delete;
  DeviceCopier& operator=(const DeviceCopier&) = delete;

  // Copies the transfer's blocks (at least one side in device memory; block ranges already
  // checked) and waits for the copies to land. Returns an empty string, or what failed.
  std::string copy(const hw_kv_transfer& t);

  // Bytes of the pinned buffer that stages copies between two GPUs.
  static constexpr size_t kStagingBytes = size_t{16} << 20;

 private:
  // The dedicated stream of `device` (created on first use); null with `error` set on failure.
  CUstream_st* stream_of(int device, std::string& error);
  std::string copy_between_devices(const hw_kv_transfer& t);

  std::map<int, CUstream_st*> streams_;  // by device
  void* staging_ = nullptr;              // pinned, kStagingBytes
};

// A peer link's copies between a GPU and its ring (byte_mover.h): cudaMemcpyAsync (direction
// inferred from the pointers, so the ring must be registered: PinnedRegistration) on a
// non-blocking stream of its own on `device`, created on first use; finish() synchronises it.
// Ownership: owns the stream. Threading: one link thread.
std::unique_ptr<ByteMover> make_device_byte_mover(int device);

// Pins [base, base + bytes) of this process's memory (cudaHostRegister, portable: usable from every
// device's context) until destruction, registering and unregistering with `device` current (the
// calling thread's device is restored): the KV's own GPU, not whichever one the thread had, which
// would make a context there. error() says why it could not (then nothing is pinned).
class PinnedRegistration {
 public:
  PinnedRegistration(void* base, size_t bytes, int device);
  ~PinnedRegistration();
  PinnedRegistration(const PinnedRegistration&) = delete;
  PinnedRegistration& operator=(const PinnedRegistration&) = delete;
  const std::string& error() const { return error_; }
  // The device was usable but cudaHostRegister refused the range (some sandboxes refuse shared
  // mappings): copies through pageable memory still work there.
  bool register_refused() const { return register_refused_; }

 private:
  void* base_ = nullptr;  // null unless registered
  bool register_refused_ = false;
  int device_ = 0;
  std::string error_;
};

}  // namespace headway::kv_transports::host_copy
