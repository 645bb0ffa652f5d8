#include "slow_client_reaper.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "freed_memory.h"
#include "process_sockets.h"

namespace headway::serving::http {
namespace {

// One connection of the server, through a duplicate of its descriptor: cpp-httplib may close its
// own meanwhile and the number be reused by another connection, but the duplicate keeps naming
// this socket, so that nothing done through it (a shutdown) reaches another. Closed by ~Sockets.
struct ServerSocket {
  int fd;  // the duplicate
  SlowClientReaper::Connection4 key;
  uint64_t inode;
  uint64_t bytes_read;  // by the server: received, less what still waits in the kernel's queue
};

class Sockets {
 public:
  Sockets() = default;
  Sockets(const Sockets&) = delete;
  Sockets& operator=(const Sockets&) = delete;
  ~Sockets() {
    for (const ServerSocket& s : list) ::close(s.fd);
  }
  std::vector<ServerSocket> list;
};

// The connected sockets of the server listening on `port` (its listening socket has no peer).
void find_server_sockets(uint16_t port, Sockets& out) {
  for_each_descriptor([&](int fd) {
    sockaddr_storage address{};
    socklen_t size = sizeof address;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0 ||
        port_of(address) != port) {
      return true;
    }
    // From here on, only the duplicate: every answer below is about one socket.
    const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return true;
    sockaddr_storage local{}, peer{};
    socklen_t local_size = sizeof local, peer_size = sizeof peer;
    struct stat status {};
    tcp_info info{};
    socklen_t info_size = sizeof info;
    int queued = 0;
    if (::getsockname(dup, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        port_of(local) != port ||
        ::getpeername(dup, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0 ||
        ::fstat(dup, &status) != 0 ||
        ::getsockopt(dup, IPPROTO_TCP, TCP_INFO, &info, &info_size) != 0 ||
        ::ioctl(dup, SIOCINQ, &queued) != 0) {
      ::close(dup);
      return true;
    }
    const uint64_t received = info.tcpi_bytes_received;
    const uint64_t waiting = static_cast<uint64_t>(std::max(queued, 0));
    out.list.push_back(ServerSocket{dup,
                                    {numeric_host(local, local_size), port_of(local),
                                     numeric_host(peer, peer_size), port_of(peer)},
                                    static_cast<uint64_t>(status.st_ino),
                                    received > waiting ? received - waiting : 0});
    return true;
  });
}

}  // namespace

SlowClientReaper::SlowClientReaper(uint16_t port, SlowClientLimits limits)
    : port_(port), limits_(limits), thread_([this] { run(); }) {}

SlowClientReaper::~SlowClientReaper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SlowClientReaper::request_began(const Connection4& connection) {
  std::lock_guard lock(mutex_);
  auto [it, added] = connections_.try_emplace(connection);
  Connection& c = it->second;
  if (added) c.created_in_scan = scans_;
  ++c.in_requests;
  c.reading = false;
  c.awaiting_body = true;
  c.body_since = std::chrono::steady_clock::now();
}

void SlowClientReaper::body_received(const Connection4& connection) {
  std::lock_guard lock(mutex_);
  if (auto it = connections_.find(connection); it != connections_.end()) {
    it->second.awaiting_body = false;
  }
}

void SlowClientReaper::request_ended(const Connection4& connection) {
  {
    std::lock_guard lock(mutex_);
    auto it = connections_.find(connection);
    // A request refused before routing (a malformed request line) began nowhere.
    if (it == connections_.end() || it->second.in_requests == 0) return;
    it->second.awaiting_body = false;  // a body that could not be read ends here
    if (--it->second.in_requests == 0) it->second.baseline_scans = 2;
    if (!it->second.stop_reading_after_answer) return;
    it->second.stop_reading_after_answer = false;
  }
  // Outside the lock: other workers' requests do not wait for the walk.
  Sockets sockets;
  find_server_sockets(port_, sockets);
  for (const ServerSocket& socket : sockets.list) {
    if (socket.key == connection) ::shutdown(socket.fd, SHUT_RD);
  }
}

void SlowClientReaper::shut_down_all() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  Sockets sockets;
  find_server_sockets(port_, sockets);
  for (const ServerSocket& socket : sockets.list) ::shutdown(socket.fd, SHUT_RD);
}

void SlowClientReaper::stop_reading_after_answer(const Connection4& connection) {
  std::lock_guard lock(mutex_);
  connections_[connection].stop_reading_after_answer = true;
}

void SlowClientReaper::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, limits_.scan_interval, [&] { return stopping_; })) {
    lock.unlock();
    scan();
    // The frontend's one periodic thread also runs the trim a burst of large bodies left pending.
    return_freed_memory_if_pending();
    lock.lock();
  }
}

void SlowClientReaper::scan() {
  // The descriptors are walked without the lock: request_began/ended never wait on a scan.
  Sockets sockets;  // outlives the lock below: the shutdowns go through its duplicates
  find_server_sockets(port_, sockets);
  const auto now = std::chrono::steady_clock::now();
  std::vector<const ServerSocket*> to_reap;
  std::lock_guard lock(mutex_);
  const uint64_t scan = ++scans_;
  for (const ServerSocket& socket : sockets.list) {
    Connection& c = connections_[socket.key];
    if (c.inode != socket.inode) {
      // The same four addresses, a new socket: the old connection closed and its client reused
      // the port. A request begun on the new one stays counted; what was read is the new one's.
      if (c.inode != 0) {
        c.read_at_idle = 0;
        c.reading = false;
        c.reaped = false;
      }
      c.inode = socket.inode;
    }
    c.seen_in_scan = scan;
    if (c.reaped) continue;
    if (c.in_requests > 0) {
      if (c.awaiting_body && now - c.body_since > limits_.body_time) {
        c.reaped = true;
        to_reap.push_back(&socket);
      }
      continue;
    }
    if (c.baseline_scans > 0) {
      --c.baseline_scans;
      c.read_at_idle = socket.bytes_read;
      c.reading = false;
      continue;
    }
    const uint64_t read = socket.bytes_read - std::min(socket.bytes_read, c.read_at_idle);
    if (read > 0 && !c.reading) {
      c.reading = true;
      c.reading_since = now;
    }
    if (read > limits_.header_bytes || (c.reading && now - c.reading_since > limits_.header_time)) {
      c.reaped = true;
      to_reap.push_back(&socket);
    }
  }
  // Gone: the connections no scan finds any more, and those known only from request_began() that
  // two scans have not found since their request ended.
  std::erase_if(connections_, [&](const auto& entry) {
    const Connection& c = entry.second;
    return c.seen_in_scan == 0 ? c.in_requests == 0 && scan > c.created_in_scan + 2
                               : c.seen_in_scan != scan;
  });
  for (const ServerSocket* socket : to_reap) ::shutdown(socket->fd, SHUT_RDWR);
}

}  // namespace headway::serving::http
