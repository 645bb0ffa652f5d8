#include "slow_client_reaper.h"

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "process_sockets.h"

namespace headway::serving::http {
namespace {

struct ServerSocket {
  int fd;
  uint64_t inode;
  std::string peer_host;
  int peer_port;
  uint64_t bytes_read;  // by the server: received, less what still waits in the kernel's queue
};

// The connected sockets of the server listening on `port` (its listening socket has no peer).
std::vector<ServerSocket> server_sockets(uint16_t port) {
  std::vector<ServerSocket> sockets;
  for_each_descriptor([&](int fd) {
    sockaddr_storage address{};
    socklen_t size = sizeof address;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0 ||
        port_of(address) != port) {
      return true;
    }
    size = sizeof address;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) return true;
    struct stat status {};
    tcp_info info{};
    socklen_t info_size = sizeof info;
    int queued = 0;
    if (::fstat(fd, &status) != 0 ||
        ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &info_size) != 0 ||
        ::ioctl(fd, SIOCINQ, &queued) != 0) {
      return true;
    }
    const uint64_t received = info.tcpi_bytes_received;
    const uint64_t waiting = static_cast<uint64_t>(std::max(queued, 0));
    sockets.push_back(ServerSocket{fd, static_cast<uint64_t>(status.st_ino),
                                   numeric_host(address, size), port_of(address),
                                   received > waiting ? received - waiting : 0});
    return true;
  });
  return sockets;
}

// Shuts `socket` down when its descriptor still holds the same socket (cpp-httplib may have closed
// it since the scan, and the number been reused).
void shut_down(const ServerSocket& socket, int how) {
  struct stat status {};
  if (::fstat(socket.fd, &status) == 0 && static_cast<uint64_t>(status.st_ino) == socket.inode) {
    ::shutdown(socket.fd, how);
  }
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

void SlowClientReaper::request_began(const std::string& remote_addr, int remote_port) {
  std::lock_guard lock(mutex_);
  auto [it, added] = connections_.try_emplace({remote_addr, remote_port});
  Connection& c = it->second;
  if (added) c.created_in_scan = scans_;
  ++c.in_requests;
  c.reading = false;
}

void SlowClientReaper::request_ended(const std::string& remote_addr, int remote_port) {
  std::lock_guard lock(mutex_);
  auto it = connections_.find({remote_addr, remote_port});
  // A request refused before routing (a malformed request line) began nowhere.
  if (it == connections_.end() || it->second.in_requests == 0) return;
  if (--it->second.in_requests == 0) it->second.baseline_scans = 2;
}

void SlowClientReaper::shut_down_all() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const ServerSocket& socket : server_sockets(port_)) shut_down(socket, SHUT_RD);
}

uint64_t SlowClientReaper::reaped() const {
  std::lock_guard lock(mutex_);
  return reaped_;
}

void SlowClientReaper::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, limits_.scan_interval, [&] { return stopping_; })) {
    lock.unlock();
    scan();
    lock.lock();
  }
}

void SlowClientReaper::scan() {
  // The descriptors are walked without the lock: request_began/ended never wait on a scan.
  const std::vector<ServerSocket> sockets = server_sockets(port_);
  const auto now = std::chrono::steady_clock::now();
  std::vector<const ServerSocket*> to_reap;
  std::lock_guard lock(mutex_);
  const uint64_t scan = ++scans_;
  for (const ServerSocket& socket : sockets) {
    Connection& c = connections_[{socket.peer_host, socket.peer_port}];
    if (c.inode != socket.inode) {
      if (c.inode != 0) c = Connection{};  // another connection from the same peer address
      c.inode = socket.inode;
    }
    c.seen_in_scan = scan;
    if (c.in_requests > 0 || c.reaped) continue;
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
      ++reaped_;
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
  for (const ServerSocket* socket : to_reap) shut_down(*socket, SHUT_RDWR);
}

}  // namespace headway::serving::http
