#include "shared_link_memory.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <headway/sdk/shm_owner.hpp>
#include <headway/sdk/status.hpp>
#include <new>
#include <random>
#include <system_error>

namespace headway::kv_transports::host_copy {

namespace {

using sdk::Error;

constexpr uint64_t kMagic = 0x4b4e494c564b5748;  // "HWKVLINK"
constexpr uint32_t kVersion = 2;
constexpr uint64_t kPage = 4096;
constexpr size_t kMaxNameBytes = 128;

// The atomics live in memory two processes map: they must not hide a lock, and a futex needs the
// plain 32-bit word.
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

uint64_t round_up(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

// strerror is not thread-safe; the generic category's message is.
std::string error_text(int error) { return std::generic_category().message(error); }
std::string errno_text() { return error_text(errno); }

}  // namespace

// One direction's cursors and wake word, each on its own cache line (the two processes write
// different ones).
struct alignas(64) RingControl {
  std::atomic<uint64_t> written{0};
  alignas(64) std::atomic<uint64_t> consumed{0};
  alignas(64) std::atomic<uint32_t> wake{0};
  std::atomic<uint32_t> waiters{0};  // threads inside wait(): wake() skips the syscall without
};

struct SharedLinkMemory::Header {
  uint64_t magic = 0;
  uint32_t version = 0;
  uint32_t reserved = 0;
  uint64_t ring_bytes = 0;
  std::atomic<int32_t> holder[2] = {0, 0};
  // The pid namespace of each holder (/proc/self/ns/pid's inode; 0 until known): its pid means
  // something to the other side only when both share it.
  std::atomic<uint64_t> pid_namespace[2] = {0, 0};
  std::atomic<uint32_t> closed[2] = {0, 0};
  RingControl ring[2];
};

uint64_t SharedLinkMemory::data_offset() { return round_up(sizeof(Header), kPage); }

std::string link_name_problem(const std::string& name) {
  const std::string prefix = kLinkObjectPrefix;
  if (name.rfind(prefix, 0) != 0) return "it does not begin with '" + prefix + "'";
  if (name.size() == prefix.size()) return "nothing follows '" + prefix + "'";
  if (name.size() > kMaxNameBytes) {
    return "it is longer than " + std::to_string(kMaxNameBytes) + " bytes";
  }
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-')) {
      return "byte " + std::to_string(i) + " is not one of [0-9a-z-]";
    }
  }
  return {};
}

SharedLinkMemory::SharedLinkMemory(std::string name, void* mapping, size_t mapping_bytes)
    : name_(std::move(name)), mapping_(mapping), mapping_bytes_(mapping_bytes) {
  ring_bytes_ = header().ring_bytes;
}

SharedLinkMemory::~SharedLinkMemory() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
}

std::unique_ptr<SharedLinkMemory> SharedLinkMemory::create(uint64_t ring_bytes) {
  if (ring_bytes == 0 || ring_bytes % kPage != 0) {
    throw Error(HW_INVALID_ARGUMENT, "host_copy: link rings of " + std::to_string(ring_bytes) +
                                         " bytes (not a positive multiple of 4096)");
  }
  std::random_device random;
  const uint64_t nonce = (static_cast<uint64_t>(random()) << 32) ^ random();
  char digits[17];
  std::snprintf(digits, sizeof digits, "%016llx", static_cast<unsigned long long>(nonce));
  const std::string name = kLinkObjectPrefix + sdk::own_shm_owner_tag() + digits;
  const size_t bytes = data_offset() + 2 * ring_bytes;

  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error(HW_UNAVAILABLE,
                "host_copy: cannot create the link object " + name + ": " + errno_text());
  }
  // posix_fallocate, not ftruncate: /dev/shm must really have the room, or the first write past
  // what it has would kill the process with SIGBUS instead of failing here.
  const int fallocated = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  void* mapping = fallocated == 0
                      ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                      : MAP_FAILED;
  const int saved = fallocated != 0 ? fallocated : errno;
  ::close(fd);
  if (mapping == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw Error(HW_RESOURCE_EXHAUSTED,
                "host_copy: cannot make the link object " + name + " of " + std::to_string(bytes) +
                    " bytes in /dev/shm: " + error_text(saved) +
                    (saved == ENOSPC ? " (a container's /dev/shm is often 64 MiB: give it more, "
                                       "e.g. docker run --shm-size, or lower peer_link_buffer_mb)"
                                     : ""));
  }
  auto* header = new (mapping) Header();
  header->version = kVersion;
  header->ring_bytes = ring_bytes;
  std::atomic_ref<uint64_t>(header->magic).store(kMagic, std::memory_order_release);
  return std::unique_ptr<SharedLinkMemory>(new SharedLinkMemory(name, mapping, bytes));
}

std::unique_ptr<SharedLinkMemory> SharedLinkMemory::open(const std::string& name) {
  if (const std::string problem = link_name_problem(name); !problem.empty()) {
    throw Error(HW_INVALID_ARGUMENT,
                "host_copy: '" + name + "' is not a link rendezvous id: " + problem);
  }
  // shm_open adds O_NOFOLLOW; O_NONBLOCK keeps a FIFO planted under the name from blocking us.
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK, 0);
  if (fd < 0) {
    const int saved = errno;
    throw Error(saved == ENOENT ? HW_NOT_FOUND : HW_UNAVAILABLE,
                "host_copy: cannot open the link object " + name + ": " + error_text(saved) +
                    (saved == ENOENT ? " (host_copy links join processes of one host only, and "
                                       "the name goes once both ranks joined)"
                                     : ""));
  }
  struct stat info {};
  const bool stated = ::fstat(fd, &info) == 0;
  const auto refuse = [&](const std::string& why) {
    ::close(fd);
    return Error(HW_FAILED_PRECONDITION, "host_copy: link object " + name + " " + why);
  };
  if (!stated) throw refuse("cannot be examined: " + errno_text());
  if (!S_ISREG(info.st_mode)) throw refuse("is not a regular file");
  if (info.st_uid != ::geteuid()) {
    throw refuse("belongs to uid " + std::to_string(info.st_uid) + ", not to this process's " +
                 std::to_string(::geteuid()));
  }
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size < data_offset()) throw refuse("is " + std::to_string(size) + " bytes, too short");
  void* mapping = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) throw refuse("cannot be mapped: " + errno_text());
  ::close(fd);
  auto* header = static_cast<Header*>(mapping);
  const uint64_t magic = std::atomic_ref<uint64_t>(header->magic).load(std::memory_order_acquire);
  std::string problem;
  if (magic != kMagic) {
    problem = "is not a host_copy link (its first 8 bytes are not the link's magic)";
  } else if (header->version != kVersion) {
    problem = "has layout version " + std::to_string(header->version) + "; this plugin reads " +
              std::to_string(kVersion);
  } else if (header->ring_bytes == 0 || header->ring_bytes % kPage != 0 ||
             header->ring_bytes > (size - data_offset()) / 2 ||
             size != data_offset() + 2 * header->ring_bytes) {
    problem = "is " + std::to_string(size) + " bytes, which its rings of " +
              std::to_string(header->ring_bytes) + " bytes do not explain";
  }
  if (!problem.empty()) {
    ::munmap(mapping, size);
    throw Error(HW_FAILED_PRECONDITION, "host_copy: link object " + name + " " + problem);
  }
  return std::unique_ptr<SharedLinkMemory>(new SharedLinkMemory(name, mapping, size));
}

void SharedLinkMemory::unlink() const noexcept { ::shm_unlink(name_.c_str()); }

void SharedLinkMemory::remove_name(const std::string& name) noexcept {
  if (link_name_problem(name).empty()) ::shm_unlink(name.c_str());
}

bool SharedLinkMemory::claim(int rank) {
  int32_t nobody = 0;
  const bool claimed = header().holder[rank].compare_exchange_strong(nobody, ::getpid());
  if (claimed) {
    header().pid_namespace[rank].store(sdk::own_pid_namespace());
    wake(0);
    wake(1);
  }
  return claimed;
}

int32_t SharedLinkMemory::holder(int rank) const { return header().holder[rank].load(); }

bool SharedLinkMemory::holder_exited(int rank) const {
  return sdk::shm_owner_exited(
      sdk::ShmOwner{header().pid_namespace[rank].load(), header().holder[rank].load()});
}

size_t SharedLinkMemory::remove_orphans() noexcept {
  return sdk::remove_orphaned_shm_objects(kLinkObjectPrefix);
}

void SharedLinkMemory::close_side(int rank) {
  header().closed[rank].store(1);
  wake(0);
  wake(1);
}

bool SharedLinkMemory::side_closed(int rank) const { return header().closed[rank].load() != 0; }

unsigned char* SharedLinkMemory::ring(int rank) const {
  return static_cast<unsigned char*>(mapping_) + data_offset() + rank * ring_bytes_;
}

std::atomic<uint64_t>& SharedLinkMemory::written(int rank) const {
  return header().ring[rank].written;
}

std::atomic<uint64_t>& SharedLinkMemory::consumed(int rank) const {
  return header().ring[rank].consumed;
}

uint32_t SharedLinkMemory::wake_value(int rank) const { return header().ring[rank].wake.load(); }

void SharedLinkMemory::wake(int rank) const {
  RingControl& ring = header().ring[rank];
  ring.wake.fetch_add(1);
  // A waiter increments `waiters` before it sleeps on the value it read; if it read the value
  // before this increment, its futex wait returns at once, so skipping the call loses nothing.
  if (ring.waiters.load() != 0) {
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ring.wake), FUTEX_WAKE, INT_MAX, nullptr,
              nullptr, 0);
  }
}

void SharedLinkMemory::wait(int rank, uint32_t seen, std::chrono::milliseconds timeout) const {
  RingControl& ring = header().ring[rank];
  const auto ms = timeout.count();
  timespec relative{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
  ring.waiters.fetch_add(1);
  // Returns on a wake, a changed value, a signal or the timeout: the caller re-checks either way.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ring.wake), FUTEX_WAIT, seen, &relative,
            nullptr, 0);
  ring.waiters.fetch_sub(1);
}

}  // namespace headway::kv_transports::host_copy
