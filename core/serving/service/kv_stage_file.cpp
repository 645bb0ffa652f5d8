#include "kv_stage_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <headway/core/error.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

namespace headway::serving {
namespace {

// A mapping of a whole shared-memory object, unmapped and closed on scope exit.
class MappedObject {
 public:
  MappedObject(const std::string& name, bool create, size_t bytes) {
    fd_ = create ? ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                 : ::shm_open(name.c_str(), O_RDONLY, 0);
    if (fd_ < 0) {
      error_ = fmt::format("shm_open {}: {}", name, std::strerror(errno));
      return;
    }
    created_ = create;
    // posix_fallocate, not ftruncate alone: tmpfs grants any size and raises SIGBUS at the first
    // page it has no room for; this fails with ENOSPC instead.
    if (create && bytes > 0) {
      const int failed = ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes));
      if (failed != 0) {
        error_ = fmt::format("reserving {} bytes for {}: {}", bytes, name, std::strerror(failed));
        return;
      }
    }
    if (!create) {
      struct stat st {};
      if (::fstat(fd_, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
        error_ = fmt::format("{} holds {} bytes, not the {} its blocks need", name,
                             static_cast<long long>(st.st_size), bytes);
        return;
      }
    }
    if (bytes == 0) return;
    void* at =
        ::mmap(nullptr, bytes, create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd_, 0);
    if (at == MAP_FAILED) {
      error_ = fmt::format("mmap {}: {}", name, std::strerror(errno));
      return;
    }
    data_ = static_cast<unsigned char*>(at);
    bytes_ = bytes;
  }
  ~MappedObject() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedObject(const MappedObject&) = delete;
  MappedObject& operator=(const MappedObject&) = delete;

  const std::string& error() const { return error_; }
  bool created() const { return created_; }
  unsigned char* data() const { return data_; }

 private:
  int fd_ = -1;
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
  bool created_ = false;
  std::string error_;
};

}  // namespace

KvStage write_kv_stage(const std::string& name, const hw_memory_desc& memory,
                       std::span<const uint32_t> blocks, uint32_t computed_tokens,
                       uint32_t block_size) {
  if (memory.kind != HW_MEMORY_HOST || memory.base == nullptr) {
    throw core::Error(
        fmt::format("{}: only KV in host memory can be staged in shared memory", name),
        HW_UNAVAILABLE);
  }
  const size_t bytes = blocks.size() * memory.block_bytes;
  MappedObject object(name, /*create=*/true, bytes);
  if (!object.error().empty()) {
    if (object.created()) discard_kv_stage(name);  // never another process's object
    throw core::Error("staging KV: " + object.error(), HW_UNAVAILABLE);
  }
  const auto* base = static_cast<const unsigned char*>(memory.base);
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::memcpy(object.data() + i * memory.block_bytes, base + blocks[i] * memory.block_stride,
                memory.block_bytes);
  }
  return KvStage{name, computed_tokens, static_cast<uint32_t>(blocks.size()), memory.block_bytes,
                 block_size};
}

std::string kv_stage_problem(const KvStage& stage, const hw_memory_desc& memory,
                             uint32_t block_size) {
  if (memory.kind != HW_MEMORY_HOST || memory.base == nullptr) {
    return "this engine's KV is not in host memory";
  }
  if (stage.block_bytes != memory.block_bytes || stage.block_size != block_size) {
    return fmt::format("its blocks are {} tokens / {} bytes, this engine's {} / {}",
                       stage.block_size, stage.block_bytes, block_size, memory.block_bytes);
  }
  if (stage.block_size == 0 ||
      stage.block_count != (stage.computed_tokens + stage.block_size - 1) / stage.block_size) {
    return fmt::format("{} blocks cannot hold exactly {} computed tokens", stage.block_count,
                       stage.computed_tokens);
  }
  MappedObject object(stage.shm_name, /*create=*/false, 0);
  return object.error();
}

std::string read_kv_stage(const KvStage& stage, const hw_memory_desc& memory,
                          std::span<const uint32_t> blocks) {
  if (blocks.size() < stage.block_count) {
    return fmt::format("{} blocks reserved for {} staged", blocks.size(), stage.block_count);
  }
  MappedObject object(stage.shm_name, /*create=*/false, stage.block_count * stage.block_bytes);
  if (!object.error().empty()) return object.error();
  auto* base = static_cast<unsigned char*>(memory.base);
  for (uint32_t i = 0; i < stage.block_count; ++i) {
    const uint64_t to = blocks[i] * memory.block_stride;
    if (to + stage.block_bytes > memory.bytes) return "a reserved block lies outside the KV cache";
    std::memcpy(base + to, object.data() + i * stage.block_bytes, stage.block_bytes);
  }
  return {};
}

void discard_kv_stage(const std::string& name) { ::shm_unlink(name.c_str()); }

bool is_kv_stage_name(const std::string& name) {
  return name.rfind(kKvStagePrefix, 0) == 0 && name.size() > std::strlen(kKvStagePrefix) &&
         name.find('/', 1) == std::string::npos;
}

std::string kv_stage_name(uint32_t engine, uint64_t request) {
  // The pid (for sweep_orphaned_kv_stages) and a per-process random part: names other processes
  // on the host cannot guess or collide with.
  static const uint64_t nonce = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  return fmt::format("{}{}-{:016x}-{}-{}", kKvStagePrefix, ::getpid(), nonce, engine, request);
}

size_t sweep_orphaned_kv_stages() {
  size_t removed = 0;
  std::error_code error;
  const std::string prefix = std::string(kKvStagePrefix).substr(1);  // without the leading '/'
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(file.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      discard_kv_stage("/" + file);
      ++removed;
    }
  }
  return removed;
}

}  // namespace headway::serving
