#include "kv_stage_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <headway/core/error.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <headway/sdk/shm_owner.hpp>
#include <random>

namespace headway::serving {

// A mapping of a shared-memory object, unmapped and closed on scope exit.
class MappedObject {
 public:
  // Reading (create false): `bytes` is how many the object must hold at least, or kWhole to map
  // all it holds.
  static constexpr size_t kWhole = static_cast<size_t>(-1);
  MappedObject(const std::string& name, bool create, size_t bytes) {
    fd_ = create ? ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                 : open_for_reading(name, error_);
    if (fd_ < 0) {
      if (error_.empty()) error_ = fmt::format("shm_open {}: {}", name, std::strerror(errno));
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
      const bool whole = bytes == kWhole;
      if (whole && ::fstat(fd_, &st) == 0) bytes = static_cast<size_t>(st.st_size);
      if (!whole && (::fstat(fd_, &st) != 0 || static_cast<size_t>(st.st_size) < bytes)) {
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

  // A descriptor of an existing stage, or -1 with `error` set. Whatever sits in /dev/shm under a
  // stage's name is opened without blocking and without following links, and must be a regular
  // file of this user: another user's object (or a FIFO, which would block the reader forever)
  // is never read, sent or mapped.
  static int open_for_reading(const std::string& name, std::string& error) {
    const int fd = ::shm_open(name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0);
    if (fd < 0) {
      error = fmt::format("shm_open {}: {}", name, std::strerror(errno));
      return -1;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
      error = fmt::format("{} is not a staged KV object of this user", name);
      ::close(fd);
      return -1;
    }
    return fd;
  }

  const std::string& error() const { return error_; }
  bool created() const { return created_; }
  unsigned char* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  int fd_ = -1;
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
  bool created_ = false;
  std::string error_;
};

StagedBytes::StagedBytes(const std::string& name)
    : object_(std::make_unique<MappedObject>(name, /*create=*/false, MappedObject::kWhole)) {}
StagedBytes::~StagedBytes() = default;
const std::string& StagedBytes::error() const { return object_->error(); }
std::span<const unsigned char> StagedBytes::bytes() const {
  return {object_->data(), object_->size()};
}

KvStageWriter::KvStageWriter(const std::string& name, uint32_t block_count, uint64_t block_bytes)
    : object_(std::make_unique<MappedObject>(name, /*create=*/true, block_count * block_bytes)),
      name_(name),
      block_count_(block_count),
      block_bytes_(block_bytes) {
  if (!object_->error().empty()) {
    const bool created = object_->created();
    const std::string error = object_->error();
    object_.reset();
    if (created) discard_kv_stage(name);  // never another process's object
    throw core::Error("staging KV: " + error, HW_UNAVAILABLE);
  }
}

KvStageWriter::~KvStageWriter() {
  if (!committed_) discard_kv_stage(name_);
}

hw_memory_desc KvStageWriter::memory() const {
  return hw_memory_desc{object_->data(), object_->size(), HW_MEMORY_HOST, -1,
                        block_bytes_,    block_bytes_};
}

KvStage KvStageWriter::commit(uint32_t computed_tokens, uint32_t block_size) {
  committed_ = true;
  KvStage stage;
  stage.shm_name = name_;
  stage.computed_tokens = computed_tokens;
  stage.block_count = block_count_;
  stage.block_bytes = block_bytes_;
  stage.block_size = block_size;
  return stage;
}

KvStage write_kv_stage(const std::string& name, const hw_memory_desc& memory,
                       std::span<const uint32_t> blocks, uint32_t computed_tokens,
                       uint32_t block_size) {
  if (memory.kind != HW_MEMORY_HOST || memory.base == nullptr) {
    throw core::Error(
        fmt::format("{}: only KV in host memory can be staged without a KV transport (KV on a GPU "
                    "needs [kv_transport] plugin = \"host_copy\" in this process's config)",
                    name),
        HW_UNAVAILABLE);
  }
  KvStageWriter writer(name, static_cast<uint32_t>(blocks.size()), memory.block_bytes);
  auto* to = static_cast<unsigned char*>(writer.memory().base);
  const auto* base = static_cast<const unsigned char*>(memory.base);
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::memcpy(to + i * memory.block_bytes, base + blocks[i] * memory.block_stride,
                memory.block_bytes);
  }
  return writer.commit(computed_tokens, block_size);
}

KvStageReader::KvStageReader(const KvStage& stage)
    : block_count_(stage.block_count), block_bytes_(stage.block_bytes) {
  const size_t bytes = stage.block_count * stage.block_bytes;
  if (stage.fetched != nullptr) {
    if (stage.fetched->size() != bytes) {
      error_ = fmt::format("{} bytes were fetched for {} blocks of {}", stage.fetched->size(),
                           stage.block_count, stage.block_bytes);
      return;
    }
    fetched_ = stage.fetched;
    data_ = fetched_->data();
    return;
  }
  mapping_ = std::make_unique<MappedObject>(stage.shm_name, /*create=*/false, bytes);
  error_ = mapping_->error();
  if (error_.empty()) data_ = mapping_->data();
}

KvStageReader::~KvStageReader() = default;

hw_memory_desc KvStageReader::memory() const {
  // A transport only reads its source: the const_cast does not let anything write the mapping
  // (mapped read-only) or the fetched bytes.
  return hw_memory_desc{const_cast<unsigned char*>(data_),
                        data_ == nullptr ? 0 : block_count_ * block_bytes_,
                        HW_MEMORY_HOST,
                        -1,
                        block_bytes_,
                        block_bytes_};
}

std::string kv_stage_layout_problem(const KvStage& stage) {
  if (stage.block_size == 0 || stage.block_bytes == 0 ||
      stage.block_count !=
          (uint64_t{stage.computed_tokens} + stage.block_size - 1) / stage.block_size) {
    return fmt::format("{} blocks of {} tokens / {} bytes cannot hold exactly {} computed tokens",
                       stage.block_count, stage.block_size, stage.block_bytes,
                       stage.computed_tokens);
  }
  return {};
}

std::string kv_stage_model_problem(const KvStage& stage, const hw_model_info& model) {
  if (stage.layers == 0 || model.layers == 0) return {};  // one side does not say
  if (stage.layers == model.layers && stage.kv_heads == model.kv_heads &&
      stage.head_dim == model.head_dim) {
    return {};
  }
  return fmt::format(
      "it is the KV of a model of {} layers x {} KV heads x {} dims, this engine's model has "
      "{} x {} x {}",
      stage.layers, stage.kv_heads, stage.head_dim, model.layers, model.kv_heads, model.head_dim);
}

std::string kv_stage_problem(const KvStage& stage, const hw_memory_desc& memory,
                             uint32_t block_size) {
  if (memory.kind == HW_MEMORY_NONE || memory.base == nullptr) {
    return "this engine has no KV memory to copy it into";
  }
  if (stage.block_bytes != memory.block_bytes || stage.block_size != block_size) {
    return fmt::format("its blocks are {} tokens / {} bytes, this engine's {} / {}",
                       stage.block_size, stage.block_bytes, block_size, memory.block_bytes);
  }
  if (std::string problem = kv_stage_layout_problem(stage); !problem.empty()) return problem;
  if (stage.held) return {};  // in its prefill process's engine, pulled over a peer link
  if (!stage.unusable.empty()) return stage.unusable;
  if (stage.fetched != nullptr) return KvStageReader(stage).error();
  MappedObject object(stage.shm_name, /*create=*/false, 0);  // exists, without mapping it
  return object.error();
}

std::string kv_stage_memcpy_problem(const hw_memory_desc& memory) {
  if (memory.kind == HW_MEMORY_HOST && memory.base != nullptr) return {};
  return "this engine's KV is not in host memory and this process has no KV transport to copy it "
         "there ([kv_transport] plugin = \"host_copy\")";
}

std::string read_kv_stage(const KvStage& stage, const hw_memory_desc& memory,
                          std::span<const uint32_t> blocks, uint32_t first) {
  if (std::string problem = kv_stage_memcpy_problem(memory); !problem.empty()) return problem;
  if (blocks.size() < stage.block_count) {
    return fmt::format("{} blocks reserved for {} staged", blocks.size(), stage.block_count);
  }
  const KvStageReader source(stage);
  if (!source.error().empty()) return source.error();
  const auto* from = static_cast<const unsigned char*>(source.memory().base);
  auto* base = static_cast<unsigned char*>(memory.base);
  for (uint32_t i = first; i < stage.block_count; ++i) {
    const uint64_t to = blocks[i] * memory.block_stride;
    if (to + stage.block_bytes > memory.bytes) return "a reserved block lies outside the KV cache";
    std::memcpy(base + to, from + i * stage.block_bytes, stage.block_bytes);
  }
  return {};
}

void discard_kv_stage(const std::string& name) {
  // Only a stage's name: a router removes what an engine process names in its hand-off, which
  // must never reach another program's shared memory (helper-203's review).
  if (is_kv_stage_name(name)) ::shm_unlink(name.c_str());
}

bool is_kv_stage_name(const std::string& name) {
  return name.rfind(kKvStagePrefix, 0) == 0 && name.size() > std::strlen(kKvStagePrefix) &&
         name.find('/', 1) == std::string::npos;
}

const std::string& own_kv_stage_prefix() {
  // The owner (pid namespace and pid, for sweep_orphaned_kv_stages) and a per-process random
  // part: names other processes on the host cannot guess or collide with.
  static const std::string prefix = [] {
    std::random_device device;
    const uint64_t nonce = (static_cast<uint64_t>(device()) << 32) ^ device();
    return fmt::format("{}{}{:016x}-", kKvStagePrefix, sdk::own_shm_owner_tag(), nonce);
  }();
  return prefix;
}

std::string kv_stage_name(uint32_t engine, uint64_t request) {
  return fmt::format("{}{}-{}", own_kv_stage_prefix(), engine, request);
}

bool is_own_kv_stage_name(const std::string& name) {
  return is_kv_stage_name(name) && name.rfind(own_kv_stage_prefix(), 0) == 0;
}

bool kv_stage_is_here(const std::string& name) {
  std::string error;
  const int fd = MappedObject::open_for_reading(name, error);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

size_t sweep_expired_kv_stages(double max_age_s) {
  const std::string own = own_kv_stage_prefix().substr(1);  // file names lack the '/'
  const std::string any = std::string(kKvStagePrefix).substr(1);
  const auto now = std::filesystem::file_time_type::clock::now();
  const double abandoned_age_s = std::max(kAbandonedAgeFactor * max_age_s, kAbandonedMinAgeS);
  size_t removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string file = entry.path().filename().string();
    double age_limit_s = max_age_s;
    if (file.rfind(own, 0) != 0) {
      // Another process's: expired once that process has exited too (a prefill process that
      // crashed, and was not restarted to sweep its own at start: gigabytes of a 70B model's KV
      // would stay in host memory). Any other (its writer in another pid namespace: a container
      // sharing /dev/shm, restarted under a new namespace; or a name without an owner) is
      // abandoned once far older than any running writer's own sweep lets a stage get
      // (helper-208).
      if (file.rfind(any, 0) != 0) continue;
      const std::optional<sdk::ShmOwner> owner =
          sdk::parse_shm_owner(std::string_view(file).substr(any.size()));
      if (!owner || !sdk::shm_owner_exited(*owner)) age_limit_s = abandoned_age_s;
    }
    std::error_code gone;  // (removed meanwhile)
    const auto changed = std::filesystem::last_write_time(entry.path(), gone);
    if (gone || std::chrono::duration<double>(now - changed).count() < age_limit_s) continue;
    discard_kv_stage("/" + file);
    ++removed;
  }
  return removed;
}

size_t sweep_orphaned_kv_stages() { return sdk::remove_orphaned_shm_objects(kKvStagePrefix); }

}  // namespace headway::serving
