#include "safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <headway/sdk/json_depth.hpp>
#include <headway/sdk/status.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace headway::models::cpu {
namespace {

using nlohmann::json;

// The safetensors spec caps the header at 100 MB; a larger length is a corrupt or foreign file, and
// refusing it early avoids parsing garbage.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

[[noreturn]] void fail(const std::string& message) {
  throw sdk::Error(HW_INVALID_ARGUMENT, message);
}

// Element sizes of every dtype the format defines, so that unused tensors of other types are still
// bounds-checked.
uint64_t element_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t, std::less<>> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// The reason a file of mode `mode` is not read, or "" for a regular file.
std::string irregular_file(mode_t mode) {
  if (S_ISREG(mode)) return "";
  return S_ISDIR(mode) ? "a directory, not a file" : "not a regular file";
}

}  // namespace

std::string unreadable_checkpoint_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? "no such file" : std::strerror(errno);
  }
  return irregular_file(st.st_mode);
}

std::string read_checkpoint_text(const std::filesystem::path& path) {
  // Checked before opening: a FIFO blocks open() until a writer comes, and a directory opens as a
  // stream that reads as empty (then "invalid JSON: unexpected end of input").
  if (const std::string why = unreadable_checkpoint_file(path); !why.empty()) {
    fail(path.string() + ": cannot open: " + why);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string() + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t dtype_size(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

uint64_t TensorView::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path.string()) {
  // O_NONBLOCK: a FIFO would block open() until a writer comes; it is refused below as any file
  // that is not a regular one (a directory fails only at mmap, "No such device").
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path_ + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path_ + ": cannot stat: " + std::strerror(err));
  }
  if (const std::string why = irregular_file(st.st_mode); !why.empty()) {
    ::close(fd);
    fail(path_ + ": cannot open: " + why);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path_ + ": truncated: " + std::to_string(size) +
         " bytes, shorter than the 8-byte header length");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (base == MAP_FAILED) fail(path_ + ": cannot mmap: " + std::strerror(map_errno));
  mapping_ = base;
  mapped_bytes_ = size;
  // From here on a throw must unmap: the destructor does not run for a throwing constructor.
  try {
    const auto* bytes = static_cast<const std::byte*>(base);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i)
      header_len = (header_len << 8) | std::to_integer<uint64_t>(bytes[i]);
    if (header_len > kMaxHeaderBytes) {
      fail(path_ + ": header length " + std::to_string(header_len) +
           " exceeds the 100 MB the format allows: not a safetensors file, or corrupt");
    }
    if (header_len > size - 8) {
      fail(path_ + ": truncated: the header claims " + std::to_string(header_len) +
           " bytes but the file has only " + std::to_string(size - 8) + " after the length");
    }
    const std::string_view header_text(reinterpret_cast<const char*>(bytes + 8), header_len);
    // Before parsing: a value nested a million levels deep overflows the stack when read (dump()).
    if (const std::string problem = sdk::json_depth_problem(header_text); !problem.empty()) {
      fail(path_ + ": invalid JSON header: " + problem);
    }
    json header;
    try {
      header = json::parse(header_text);
    } catch (const json::exception& e) {  // out_of_range too: a number past a double's (1e400)
      fail(path_ + ": invalid JSON header: " + e.what());
    }
    if (!header.is_object()) fail(path_ + ": the header is not a JSON object");

    const std::byte* data = bytes + 8 + header_len;
    const uint64_t data_bytes = size - 8 - header_len;
    for (auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      const std::string where = path_ + ": tensor '" + name + "'";
      if (!entry.is_object()) fail(where + ": header entry is not an object");
      auto dtype_it = entry.find("dtype");
      auto shape_it = entry.find("shape");
      auto offsets_it = entry.find("data_offsets");
      if (dtype_it == entry.end()) fail(where + ": missing 'dtype'");
      if (!dtype_it->is_string())
        fail(where + ": 'dtype' must be a string, got " + dtype_it->dump());
      if (shape_it == entry.end()) fail(where + ": missing 'shape'");
      if (!shape_it->is_array()) fail(where + ": 'shape' must be a list, got " + shape_it->dump());
      if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
          !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
        fail(where + ": 'data_offsets' must be two non-negative integers");
      }
      TensorView t;
      t.name = name;
      t.dtype_string = dtype_it->get<std::string>();
      const uint64_t esize = element_bytes(t.dtype_string);
      if (esize == 0) fail(where + ": unknown dtype '" + t.dtype_string + "'");
      t.supported = true;
      if (t.dtype_string == "F32") {
        t.dtype = DType::kF32;
      } else if (t.dtype_string == "F16") {
        t.dtype = DType::kF16;
      } else if (t.dtype_string == "BF16") {
        t.dtype = DType::kBF16;
      } else {
        t.supported = false;
      }
      unsigned __int128 expected = esize;
      for (const json& d : *shape_it) {
        if (!d.is_number_unsigned()) fail(where + ": shape entries must be non-negative integers");
        t.shape.push_back(d.get<uint64_t>());
        expected *= d.get<uint64_t>();
        if (expected > data_bytes + 1) expected = static_cast<unsigned __int128>(data_bytes) + 1;
      }
      const uint64_t begin = (*offsets_it)[0].get<uint64_t>();
      const uint64_t end = (*offsets_it)[1].get<uint64_t>();
      if (begin > end) {
        fail(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
             ") are reversed");
      }
      if (end > data_bytes) {
        fail(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
             ") extend beyond the data section (" + std::to_string(data_bytes) +
             " bytes): the file is truncated or its header is wrong");
      }
      if (expected != end - begin) {
        fail(where + ": dtype " + t.dtype_string + " and shape " + t.shape_string() + " need " +
             std::to_string(static_cast<uint64_t>(expected)) + " bytes but data_offsets span " +
             std::to_string(end - begin));
      }
      t.data = data + begin;
      t.bytes = end - begin;
      t.file = &path_;
      tensors_.emplace(name, std::move(t));
    }
    // Overlap check: sort the extents; any tensor starting before the previous one ended overlaps.
    std::vector<const TensorView*> by_offset;
    for (const auto& [name, t] : tensors_) {
      if (t.bytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorView* a, const TensorView* b) { return a->data < b->data; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorView* prev = by_offset[i - 1];
      if (by_offset[i]->data < prev->data + prev->bytes) {
        fail(path_ + ": tensors '" + prev->name + "' and '" + by_offset[i]->name +
             "' overlap in the data section: the header is wrong");
      }
    }
  } catch (...) {
    ::munmap(mapping_, mapped_bytes_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_bytes_);
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Checkpoint::Checkpoint(const std::filesystem::path& dir) : dir_(dir) {
  const std::filesystem::path single = dir / "model.safetensors";
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index)) {
    index_path_ = index.string();
    const std::string text = read_checkpoint_text(index);
    if (const std::string problem = sdk::json_depth_problem(text); !problem.empty()) {
      fail(index_path_ + ": invalid JSON: " + problem);
    }
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {  // out_of_range too: a number past a double's (1e400)
      fail(index_path_ + ": invalid JSON: " + e.what());
    }
    auto map_it = j.find("weight_map");
    if (!j.is_object() || map_it == j.end() || !map_it->is_object()) {
      fail(index_path_ + ": missing object 'weight_map'");
    }
    std::map<std::string, const SafetensorsFile*> opened;
    for (auto& [name, shard] : map_it->items()) {
      if (!shard.is_string()) fail(index_path_ + ": tensor '" + name + "': shard is not a string");
      const std::string shard_name = shard.get<std::string>();
      // "", "." and ".." name the directory (or its parent), not a shard in it.
      if (shard_name.find('/') != std::string::npos || shard_name.empty() || shard_name == "." ||
          shard_name == "..") {
        fail(index_path_ + ": tensor '" + name + "': shard '" + shard_name +
             "' must be a file name in the checkpoint directory");
      }
      auto it = opened.find(shard_name);
      if (it == opened.end()) {
        files_.push_back(std::make_unique<SafetensorsFile>(dir / shard_name));
        it = opened.emplace(shard_name, files_.back().get()).first;
      }
      index_.emplace(name, it->second);
    }
    if (files_.empty()) fail(index_path_ + ": 'weight_map' lists no tensors");
  } else if (std::filesystem::exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single));
  } else {
    fail(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  }
}

const TensorView* Checkpoint::lookup(std::string_view name) const {
  if (!index_.empty()) {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second->find(name);
  }
  return files_.front()->find(name);
}

std::string Checkpoint::describe_files() const {
  if (!index_path_.empty()) return index_path_;
  return files_.front()->path();
}

const TensorView& Checkpoint::tensor(std::string_view name, std::span<const uint64_t> shape) const {
  if (!index_.empty()) {
    auto it = index_.find(name);
    if (it != index_.end() && it->second->find(name) == nullptr) {
      fail(it->second->path() + ": tensor '" + std::string(name) + "' listed in " + index_path_ +
           " is missing from this shard");
    }
  }
  const TensorView* t = lookup(name);
  if (t == nullptr) fail(describe_files() + ": tensor '" + std::string(name) + "' not found");
  const bool same =
      t->shape.size() == shape.size() && std::equal(shape.begin(), shape.end(), t->shape.begin());
  if (!same) {
    TensorView want;
    want.shape.assign(shape.begin(), shape.end());
    fail(*t->file + ": tensor '" + t->name + "' has shape " + t->shape_string() + ", expected " +
         want.shape_string() + " from config.json");
  }
  if (!t->supported) {
    fail(*t->file + ": tensor '" + t->name + "' has dtype " + t->dtype_string +
         "; supported: F32, F16, BF16");
  }
  return *t;
}

DType Checkpoint::storage_dtype() const {
  const TensorView* t = lookup("model.embed_tokens.weight");
  return t != nullptr && t->supported ? t->dtype : DType::kF32;
}

}  // namespace headway::models::cpu
