#include "client_connection_watch.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <utility>

#include "process_sockets.h"

namespace headway::serving::http {
namespace {

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
  for_each_descriptor([&](int fd) {
    struct stat status {};
    if (!is_this_connection(fd) || ::fstat(fd, &status) != 0) return true;
    fd_ = fd;
    inode_ = status.st_ino;
    return false;
  });
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
