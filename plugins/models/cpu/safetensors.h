// Read-only access to safetensors files (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, then the data.
// Files are memory-mapped; tensors are views into the mapping, never copies.
//
// Every check a lying header could defeat is made at open time, so that a later read can never go
// out of bounds: the header length against the file size, each tensor's offsets against the data
// section, its byte size against dtype x shape, and overlaps between tensors. Failures throw
// sdk::Error(HW_INVALID_ARGUMENT) whose message names the file and, where there is one, the tensor.
//
// Ownership: a SafetensorsFile owns its mapping; TensorViews borrow it and are valid while it
// lives. A Checkpoint owns its files. Threading: immutable after construction; reads are safe from
// any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headway::models::cpu {

// The element types Headway computes with. Other safetensors dtypes may be present in a file (and
// are bounds-checked like the rest) but cannot be used as weights.
enum class DType { kF32, kF16, kBF16 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "F32", "F16", "BF16" as in safetensors headers

struct TensorView {
  std::string name;
  std::string dtype_string;  // as written in the header
  bool supported = false;    // dtype is one of DType
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  const std::byte* data = nullptr;  // into the mapping; may be unaligned
  uint64_t bytes = 0;
  const std::string* file = nullptr;  // the file it lives in, for messages

  uint64_t elements() const;
  std::string shape_string() const;  // "[4096, 512]"
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws sdk::Error as described above.
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const TensorView* find(std::string_view name) const;
  const std::map<std::string, TensorView, std::less<>>& tensors() const { return tensors_; }

 private:
  std::string path_;
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::map<std::string, TensorView, std::less<>> tensors_;
};

// Why `path` cannot be read as a checkpoint file, or "" when it is a regular file: "no such file",
// "a directory, not a file", "not a regular file" (a FIFO would block open() for ever), or the
// system's reason.
std::string unreadable_checkpoint_file(const std::filesystem::path& path);

// The whole of a checkpoint's text file (config.json, model.safetensors.index.json). Throws
// sdk::Error "<path>: cannot open: <reason>" (unreadable_checkpoint_file's) when it cannot be read.
std::string read_checkpoint_text(const std::filesystem::path& path);

// A checkpoint directory: model.safetensors, or the shards listed by model.safetensors.index.json.
class Checkpoint {
 public:
  // Throws sdk::Error naming the directory or file when nothing loadable is there.
  explicit Checkpoint(const std::filesystem::path& dir);

  // The tensor `name`, checked against `shape` and for a dtype Headway computes with. Throws
  // sdk::Error naming the file and the tensor when it is missing, has another shape or dtype.
  const TensorView& tensor(std::string_view name, std::span<const uint64_t> shape) const;
  const TensorView& tensor(std::string_view name, std::initializer_list<uint64_t> shape) const {
    return tensor(name, std::span<const uint64_t>(shape.begin(), shape.size()));
  }
  bool has(std::string_view name) const { return lookup(name) != nullptr; }
  const std::filesystem::path& dir() const { return dir_; }
  // The dtype most weights are stored in (of the embedding table), for dtype = "auto".
  DType storage_dtype() const;
  // The index json, or the single file: where a missing tensor was looked for, for messages.
  std::string describe_files() const;

 private:
  const TensorView* lookup(std::string_view name) const;

  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  // From the index json: tensor name -> file; empty for a single-file checkpoint.
  std::map<std::string, const SafetensorsFile*, std::less<>> index_;
  std::string index_path_;
};

}  // namespace headway::models::cpu
