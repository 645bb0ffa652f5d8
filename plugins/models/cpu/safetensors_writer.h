// Writes safetensors files: the tiny built-in checkpoint and test fixtures.
//
// Threading: reentrant; nothing is shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "safetensors.h"

namespace headway::models::cpu {

struct TensorData {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  std::vector<std::byte> bytes;  // elements() * dtype_size(dtype), little-endian
};

// Writes `tensors` in order, each aligned to 8 bytes past the header (the header is padded with
// spaces, as the reference implementation does, so that F32 views are aligned when mapped).
// Throws sdk::Error(HW_INVALID_ARGUMENT) when a tensor's bytes do not match its shape, and
// HW_INTERNAL when the file cannot be written.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors);

}  // namespace headway::models::cpu
