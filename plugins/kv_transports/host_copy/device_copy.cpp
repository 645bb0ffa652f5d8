#include "device_copy.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace headway::kv_transports::host_copy {
namespace {

std::string failed(const char* what, cudaError_t error) {
  return std::string(what) + ": " + cudaGetErrorString(error);
}

const unsigned char* block_at(const hw_memory_desc& m, uint32_t block) {
  return static_cast<const unsigned char*>(m.base) + block * m.block_stride;
}
unsigned char* block_at_mut(const hw_memory_desc& m, uint32_t block) {
  return static_cast<unsigned char*>(m.base) + block * m.block_stride;
}

}  // namespace

DeviceCopier::~DeviceCopier() {
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
    if (cudaError_t e = cudaMallocHost(&staging_, kStagingBytes); e != cudaSuccess) {
      staging_ = nullptr;
      return failed("cudaMallocHost (pinned staging buffer)", e);
    }
  }
  const uint64_t block = t.source.block_bytes;
  if (block > kStagingBytes) {
    return "a block of " + std::to_string(block) +
           " bytes is larger than the pinned staging "
           "buffer (" +
           std::to_string(kStagingBytes) + " bytes)";
  }
  const uint32_t per_batch = static_cast<uint32_t>(kStagingBytes / block);
  auto* staging = static_cast<unsigned char*>(staging_);
  for (uint32_t first = 0; first < t.block_count; first += per_batch) {
    const uint32_t count = std::min(per_batch, t.block_count - first);
    // Device -> pinned host, then pinned host -> device; each half waits for the previous one.
    cudaSetDevice(t.source.device_id);
    for (uint32_t i = 0; i < count; ++i) {
      const cudaError_t e =
          cudaMemcpyAsync(staging + i * block, block_at(t.source, t.source_blocks[first + i]),
                          block, cudaMemcpyDeviceToHost, from);
      if (e != cudaSuccess) {
        cudaStreamSynchronize(from);
        return failed("cudaMemcpyAsync to the staging buffer", e);
      }
    }
    if (cudaError_t e = cudaStreamSynchronize(from); e != cudaSuccess) {
      return failed("cudaStreamSynchronize (source GPU)", e);
    }
    cudaSetDevice(t.destination.device_id);
    for (uint32_t i = 0; i < count; ++i) {
      const cudaError_t e =
          cudaMemcpyAsync(block_at_mut(t.destination, t.destination_blocks[first + i]),
                          staging + i * block, block, cudaMemcpyHostToDevice, to);
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

}  // namespace headway::kv_transports::host_copy
