#include "device_copy.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace headway::kv_transports::host_copy {
namespace {

std::string failed(const char* what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorString(error);
}

// Whether the calling thread has a current CUDA context. cudaGetDevice says 0 on a thread that
// never used CUDA, and setting device 0 "back" there would make a context on GPU 0 (hundreds of
// MB of a GPU this process may not use; an error under exclusive compute mode). The driver's
// cuCtxGetCurrent tells; it is looked up through the runtime so that the plugin needs no link to
// libcuda (and still loads on machines without a driver).
bool thread_has_cuda_context() {
  using GetCurrentContext = CUresult (*)(CUcontext*);
  static const GetCurrentContext get_current = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &function, 12000,
                                                           cudaEnableDefault, &found);
#else
    // The versioned lookup came with CUDA 12.5 (and the plain one is gone from CUDA 13).
    const cudaError_t e =
        cudaGetDriverEntryPoint("cuCtxGetCurrent", &function, cudaEnableDefault, &found);
#endif
    return e == cudaSuccess && found == cudaDriverEntryPointSuccess
               ? reinterpret_cast<GetCurrentContext>(function)
               : nullptr;
  }();
  CUcontext context = nullptr;
  return get_current != nullptr && get_current(&context) == CUDA_SUCCESS && context != nullptr;
}

// Puts the calling thread's device back when it goes, if the thread had a context to go back to.
class DeviceRestorer {
 public:
  DeviceRestorer() {
    restore_ = thread_has_cuda_context() && cudaGetDevice(&previous_) == cudaSuccess;
  }
  ~DeviceRestorer() {
    if (restore_) cudaSetDevice(previous_);
  }
  DeviceRestorer(const DeviceRestorer&) = delete;
  DeviceRestorer& operator=(const DeviceRestorer&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};

// Makes `device` current for its lifetime, then restores the thread's device (DeviceRestorer).
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) : error_(cudaSetDevice(device)) {}
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  cudaError_t error() const { return error_; }

 private:
  DeviceRestorer restorer_;  // first: records the device before the constructor changes it
  cudaError_t error_;
};

const unsigned char* block_at(const hw_memory_desc& m, uint32_t block) {
  return static_cast<const unsigned char*>(m.base) + block * m.block_stride;
}
unsigned char* block_at_mut(const hw_memory_desc& m, uint32_t block) {
  return static_cast<unsigned char*>(m.base) + block * m.block_stride;
}

}  // namespace

DeviceCopier::~DeviceCopier() {
  const DeviceRestorer restorer;  // the destroying thread's device, as it was
  for (const auto& [device, stream] : streams_) {
    cudaSetDevice(device);
    cudaStreamDestroy(stream);
  }
  if (staging_ != nullptr) cudaFreeHost(staging_);
}

CUstream_st* DeviceCopier::stream_of(int device, std::string& error) {
  if (auto it = streams_.find(device); it != streams_.end()) return it->second;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    error = failed(("cudaSetDevice(" + std::to_string(device) + ")").c_str(), e);
    return nullptr;
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    error = failed("cudaStreamCreateWithFlags", e);
    return nullptr;
  }
  streams_[device] = stream;
  return stream;
}

std::string DeviceCopier::copy(const hw_kv_transfer& t) {
  const bool from_device = t.source.kind == HW_MEMORY_DEVICE;
  const bool to_device = t.destination.kind == HW_MEMORY_DEVICE;
  if (from_device && to_device && t.source.device_id != t.destination.device_id) {
    return copy_between_devices(t);
  }
  // One device is involved: its stream carries every block (host <-> device, or within it).
  const int device = from_device ? t.source.device_id : t.destination.device_id;
  std::string error;
  cudaStream_t stream = stream_of(device, error);
  if (stream == nullptr) return error;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return failed("cudaSetDevice", e);
  const cudaMemcpyKind kind = from_device && to_device ? cudaMemcpyDeviceToDevice
                              : from_device            ? cudaMemcpyDeviceToHost
                                                       : cudaMemcpyHostToDevice;
  for (uint32_t i = 0; i < t.block_count; ++i) {
    const cudaError_t e =
        cudaMemcpyAsync(block_at_mut(t.destination, t.destination_blocks[i]),
                        block_at(t.source, t.source_blocks[i]), t.source.block_bytes, kind, stream);
    if (e != cudaSuccess) {
      cudaStreamSynchronize(stream);  // what was queued must land before the blocks are reused
      return failed(("cudaMemcpyAsync of block " + std::to_string(i)).c_str(), e);
    }
  }
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return failed("cudaStreamSynchronize", e);
  }
  return {};
}

std::string DeviceCopier::copy_between_devices(const hw_kv_transfer& t) {
  std::string error;
  cudaStream_t from = stream_of(t.source.device_id, error);
  cudaStream_t to = from != nullptr ? stream_of(t.destination.device_id, error) : nullptr;
  if (to == nullptr) return error;
  if (staging_ == nullptr) {
    // Portable: the buffer is used by the source's and the destination's contexts.
    if (cudaError_t e = cudaHostAlloc(&staging_, kStagingBytes, cudaHostAllocPortable);
        e != cudaSuccess) {
      staging_ = nullptr;
      return failed("cudaHostAlloc (pinned staging buffer)", e);
    }
  }
  // The transfer as pieces of at most kStagingBytes (whole blocks where they fit, a larger block
  // in several pieces), gathered into the buffer a batch at a time.
  const uint64_t block = t.source.block_bytes;
  const uint64_t piece = std::min<uint64_t>(block, kStagingBytes);
  const uint64_t pieces_per_block = (block + piece - 1) / piece;
  const uint64_t total_pieces = uint64_t{t.block_count} * pieces_per_block;
  const uint64_t per_batch = kStagingBytes / piece;
  auto* staging = static_cast<unsigned char*>(staging_);
  struct Piece {
    uint32_t index;   // in the block lists
    uint64_t offset;  // in the block
    uint64_t size;
  };
  auto piece_of = [&](uint64_t p) {
    const uint64_t offset = (p % pieces_per_block) * piece;
    return Piece{static_cast<uint32_t>(p / pieces_per_block), offset,
                 std::min(piece, block - offset)};
  };
  for (uint64_t first = 0; first < total_pieces; first += per_batch) {
    const uint64_t count = std::min(per_batch, total_pieces - first);
    // Device -> pinned host, then pinned host -> device; each half waits for the previous one, so
    // the buffer is never refilled while a copy out of it is in flight.
    cudaSetDevice(t.source.device_id);
    for (uint64_t i = 0; i < count; ++i) {
      const Piece p = piece_of(first + i);
      const cudaError_t e = cudaMemcpyAsync(staging + i * piece,
                                            block_at(t.source, t.source_blocks[p.index]) + p.offset,
                                            p.size, cudaMemcpyDeviceToHost, from);
      if (e != cudaSuccess) {
        cudaStreamSynchronize(from);
        return failed("cudaMemcpyAsync to the staging buffer", e);
      }
    }
    if (cudaError_t e = cudaStreamSynchronize(from); e != cudaSuccess) {
      return failed("cudaStreamSynchronize (source GPU)", e);
    }
    cudaSetDevice(t.destination.device_id);
    for (uint64_t i = 0; i < count; ++i) {
      const Piece p = piece_of(first + i);
      const cudaError_t e =
          cudaMemcpyAsync(block_at_mut(t.destination, t.destination_blocks[p.index]) + p.offset,
                          staging + i * piece, p.size, cudaMemcpyHostToDevice, to);
      if (e != cudaSuccess) {
        cudaStreamSynchronize(to);
        return failed("cudaMemcpyAsync from the staging buffer", e);
      }
    }
    if (cudaError_t e = cudaStreamSynchronize(to); e != cudaSuccess) {
      return failed("cudaStreamSynchronize (destination GPU)", e);
    }
  }
  return {};
}

namespace {

class DeviceByteMover final : public ByteMover {
 public:
  explicit DeviceByteMover(int device) : device_(device) {}
  ~DeviceByteMover() override {
    if (stream_ != nullptr) {
      cudaSetDevice(device_);
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }
  DeviceByteMover(const DeviceByteMover&) = delete;
  DeviceByteMover& operator=(const DeviceByteMover&) = delete;

  std::string copy(void* destination, const void* source, size_t bytes) override {
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      return failed(("cudaSetDevice(" + std::to_string(device_) + ")").c_str(), e);
    }
    if (stream_ == nullptr) {
      if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
          e != cudaSuccess) {
        stream_ = nullptr;
        return failed("cudaStreamCreateWithFlags", e);
      }
    }
    if (cudaError_t e = cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, stream_);
        e != cudaSuccess) {
      cudaStreamSynchronize(stream_);  // what was queued lands before the caller gives up
      return failed("cudaMemcpyAsync (peer link)", e);
    }
    return {};
  }

  std::string finish() override {
    if (stream_ == nullptr) return {};
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) {
      return failed("cudaStreamSynchronize (peer link)", e);
    }
    return {};
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<ByteMover> make_device_byte_mover(int device) {
  return std::make_unique<DeviceByteMover>(device);
}

PinnedRegistration::PinnedRegistration(void* base, size_t bytes, int device) : device_(device) {
  const CurrentDevice current(device);
  if (current.error() != cudaSuccess) {
    error_ = failed(("cudaSetDevice(" + std::to_string(device) + ")").c_str(), current.error());
    return;
  }
  if (cudaError_t e = cudaHostRegister(base, bytes, cudaHostRegisterPortable); e != cudaSuccess) {
    cudaGetLastError();  // not sticky; cleared so that later calls do not report it
    error_ = failed(("cudaHostRegister of " + std::to_string(bytes) + " bytes").c_str(), e);
    register_refused_ = true;
    return;
  }
  base_ = base;
}

PinnedRegistration::~PinnedRegistration() {
  if (base_ == nullptr) return;
  const CurrentDevice current(device_);
  cudaHostUnregister(base_);
}

}  // namespace headway::kv_transports::host_copy
