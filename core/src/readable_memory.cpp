#include "readable_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>

namespace headway::core {
namespace {

// Closes both ends of a pipe when it goes out of scope.
struct Pipe {
  std::array<int, 2> fds{-1, -1};
  Pipe() {
    if (::pipe2(fds.data(), O_CLOEXEC | O_NONBLOCK) != 0) fds = {-1, -1};
  }
  ~Pipe() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  bool open() const { return fds[0] >= 0; }
};

}  // namespace

bool readable_memory(const void* address, size_t bytes) {
  if (bytes == 0) return true;
  const auto begin = reinterpret_cast<uintptr_t>(address);
  if (address == nullptr || begin + bytes < begin) return false;  // NULL, or wraps around
  Pipe pipe;
  // Without a pipe there is no safe way to look: say readable, as the host did before this check.
  if (!pipe.open()) return true;
  // A pipe holds at least one page: each piece is written, then drained, so that writes never
  // block on a full pipe.
  constexpr size_t kPiece = 4096;
  std::array<char, kPiece> sink;
  const auto* at = static_cast<const char*>(address);
  for (size_t done = 0; done < bytes;) {
    const size_t piece = bytes - done < kPiece ? bytes - done : kPiece;
    const ssize_t written = ::write(pipe.fds[1], at + done, piece);
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno != EFAULT;  // another failure says nothing about the memory
    }
    if (written == 0) return true;
    done += static_cast<size_t>(written);
    while (::read(pipe.fds[0], sink.data(), sink.size()) > 0) {
    }
  }
  return true;
}

}  // namespace headway::core
