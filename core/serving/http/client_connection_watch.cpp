#include "client_connection_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <utility>

namespace headway::serving::http {
namespace {

int port_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return -1;
}

// The numeric host of `address` as cpp-httplib writes it (getnameinfo, NI_NUMERICHOST), so that
// the strings compare equal for IPv4, IPv6 and IPv4-mapped addresses.
std::string numeric_host(const sockaddr_storage& address, socklen_t size) {
  char host[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&address), size, host, sizeof host, nullptr,
                    0, NI_NUMERICHOST) != 0) {
    return {};
  }
  return host;
}

// Between looks at the connection, and before the first.
constexpr std::chrono::seconds kLookInterval{1};

}  // namespace

ClientConnectionWatch::ClientConnectionWatch(std::string local_addr, int local_port,
                                             std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      remote_addr_(std::move(remote_addr)),
      local_port_(local_port),
      remote_port_(remote_port),
      next_look_(std::chrono::steady_clock::now() + kLookInterval) {}

void ClientConnectionWatch::find_socket() {
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return;
  while (const dirent* entry = ::readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    struct stat status {};
    if (end != entry->d_name && *end == '\0' && fd != ::dirfd(fds) &&
        is_this_connection(static_cast<int>(fd)) && ::fstat(static_cast<int>(fd), &status) == 0) {
      fd_ = static_cast<int>(fd);
      inode_ = status.st_ino;
      break;
    }
  }
  ::closedir(fds);
}

bool ClientConnectionWatch::is_this_connection(int fd) const {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  // The client's port first: it tells the server's connections apart (they all share the local
  // port), without a name lookup.
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0 ||
      port_of(address) != remote_port_ || numeric_host(address, size) != remote_addr_) {
    return false;
  }
  size = sizeof address;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0 &&
         port_of(address) == local_port_ && numeric_host(address, size) == local_addr_;
}

bool ClientConnectionWatch::gone() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_look_) return false;
  next_look_ = now + kLookInterval;
  return look();
}

bool ClientConnectionWatch::look() {
  if (!searched_) {
    searched_ = true;
    find_socket();
  }
  if (fd_ < 0) return false;
  // cpp-httplib closes a connection only after its handler returned, so the number is not reused
  // meanwhile; should it be (another socket, another inode), the watch stops rather than peek at
  // another connection. (The addresses cannot be checked again: a reset socket has no peer.)
  struct stat status {};
  if (::fstat(fd_, &status) != 0 || status.st_ino != inode_) {
    fd_ = -1;
    return false;
  }
  char byte = 0;
  const ssize_t got = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got > 0) return false;  // the next pipelined request is waiting: still there
  if (got == 0) return true;  // end of stream
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace headway::serving::http
