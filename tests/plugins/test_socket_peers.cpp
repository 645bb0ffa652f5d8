// A KV transport with peer links (abi.h, ABI 1.2) over a loopback TCP connection: lets CPU tests
// exercise the core's cross-process KV pulls with the ordering NCCL send/recv have, between two
// transport instances in one process or in two, or between two links of one instance. Host memory
// only; start() (a same-process transfer) is refused.
//
// Wire: peer_rendezvous() listens on 127.0.0.1 (kernel-chosen port) and returns the id
// "127.0.0.1:<port>/<64-bit token in hex>". The side whose instance made the id accepts one
// connection on it; the other connects, sends {token, rank} and waits for a one-byte ack, so both
// report the link up only once the peer is known to be the right one with the opposite rank. Each
// posted send then writes a header {block_count, block_bytes} (native byte order: both ends are on
// this host) and the blocks' bytes; each posted receive reads the header, fails (and breaks the
// link) when it differs from what was posted, and otherwise reads straight into its blocks.
//
// Ownership: owns its listeners, sockets and threads; every block list is copied at peer_post, and
// a transfer's memory is touched only until poll() can report it DONE or FAILED (a transfer being
// copied is never failed from outside: its own thread finishes it). peer_close() and the destructor
// join the link's threads, so no memory is touched after they return.
// Threading: every entry point may be called from any thread. One mutex guards all state; per link,
// a sender thread (which first performs the join) and a receiver thread move the bytes, posts being
// served in posting order per direction. They never hold the mutex across a socket call: they wait
// in poll(2) on the socket and a self-pipe that peer_post, peer_close and a broken link write to.
// Metrics (through the host services, so tests can follow them to a router's /metrics): the
// counter socket_links_joined and the gauge socket_links_open.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <headway/plugin.hpp>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using headway::sdk::Error;
using Clock = std::chrono::steady_clock;

constexpr hw_option_spec kOptions[] = {
    headway::sdk::double_option(
        "timeout_s", 30.0, 0.001, 3600.0,
        "Seconds after which a link still joining, or a posted transfer still in flight, fails."),
};

constexpr std::string_view kLoopback = "127.0.0.1";

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// A self-pipe: the way to wake a link thread sitting in poll(2), since a condition variable cannot
// be waited on together with a socket. Both ends are non-blocking, so notify() never blocks (a full
// pipe is already readable).
class Waker {
 public:
  Waker() {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
      throw Error(HW_INTERNAL, "test_socket_peers: " + errno_text("pipe2"));
    }
    read_ = Fd(fds[0]);
    write_ = Fd(fds[1]);
  }
  int fd() const { return read_.get(); }
  void notify() const {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(write_.get(), &byte, 1);
  }
  void drain() const {
    char bytes[64];
    while (::read(read_.get(), bytes, sizeof bytes) > 0) {
    }
  }

 private:
  Fd read_;
  Fd write_;
};

enum class Ready { kYes, kWoken, kTimedOut };

// Waits until `fd` has one of `events` (or an error), `waker` fires, or `deadline` passes. A
// negative fd waits on the waker alone (poll(2) ignores it).
Ready wait_ready(int fd, short events, const Waker& waker, Clock::time_point deadline) {
  pollfd fds[2] = {{waker.fd(), POLLIN, 0}, {fd, events, 0}};
  for (;;) {
    int timeout_ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) return Ready::kTimedOut;
      // Rounded up, so that a wake-up before the deadline does not spin on a zero timeout.
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      timeout_ms = static_cast<int>(std::min<int64_t>(ms, INT_MAX));
    }
    const int n = ::poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) return Ready::kYes;  // the socket call that follows says why
    if (n <= 0) continue;                             // EINTR or timeout: re-check the deadline
    if (fds[0].revents != 0) return Ready::kWoken;
    return Ready::kYes;
  }
}

Clock::time_point deadline_after(Clock::time_point from, double seconds) {
  return from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// "127.0.0.1:<port>/<token>" with the token as 16 hex digits.
std::string format_id(uint16_t port, uint64_t token) {
  char hex[17];
  const auto end = std::to_chars(hex, hex + 16, token, 16).ptr;
  const std::string digits(hex, end);
  return std::string(kLoopback) + ":" + std::to_string(port) + "/" +
         std::string(16 - digits.size(), '0') + digits;
}

struct ParsedId {
  in_addr host{};
  uint16_t port = 0;
  uint64_t token = 0;
};

// Parses a rendezvous id strictly; throws HW_INVALID_ARGUMENT saying what is wrong with it.
ParsedId parse_id(const std::string& id) {
  const auto bad = [&](const std::string& why) {
    return Error(HW_INVALID_ARGUMENT, "test_socket_peers: rendezvous id '" + id +
                                          "' is not host:port/token (" + why + ")");
  };
  const size_t slash = id.find('/');
  if (slash == std::string::npos) throw bad("no '/'");
  const size_t colon = id.rfind(':', slash);
  if (colon == std::string::npos) throw bad("no ':' before the '/'");
  ParsedId parsed;
  const std::string host = id.substr(0, colon);
  if (::inet_pton(AF_INET, host.c_str(), &parsed.host) != 1) throw bad("host is not IPv4");
  const char* port_begin = id.data() + colon + 1;
  const char* port_end = id.data() + slash;
  unsigned port = 0;
  const auto p = std::from_chars(port_begin, port_end, port);
  if (port_begin == port_end || p.ec != std::errc() || p.ptr != port_end || port == 0 ||
      port > 65535) {
    throw bad("port is not 1..65535");
  }
  parsed.port = static_cast<uint16_t>(port);
  const char* token_begin = id.data() + slash + 1;
  const char* token_end = id.data() + id.size();
  const auto t = std::from_chars(token_begin, token_end, parsed.token, 16);
  if (token_begin == token_end || token_end - token_begin > 16 || t.ec != std::errc() ||
      t.ptr != token_end) {
    throw bad("token is not 1..16 hex digits");
  }
  return parsed;
}

const char* kind_name(int32_t kind) {
  switch (kind) {
    case HW_MEMORY_HOST:
      return "HW_MEMORY_HOST";
    case HW_MEMORY_DEVICE:
      return "HW_MEMORY_DEVICE";
    case HW_MEMORY_NONE:
      return "HW_MEMORY_NONE";
    default:
      return "an unknown memory kind";
  }
}

// Throws HW_INVALID_ARGUMENT unless every listed block of `memory` is host memory in range.
void validate_blocks(const hw_memory_desc& m, const uint32_t* blocks, uint32_t count) {
  const auto bad = [](const std::string& why) {
    return Error(HW_INVALID_ARGUMENT, "test_socket_peers: peer_post: " + why);
  };
  if (m.kind != HW_MEMORY_HOST) {
    throw bad(std::string("memory is ") + kind_name(m.kind) + " (" + std::to_string(m.kind) +
              "), not HW_MEMORY_HOST");
  }
  if (m.base == nullptr) throw bad("memory.base is null");
  if (m.block_bytes == 0) throw bad("memory.block_bytes is 0");
  if (m.block_stride < m.block_bytes) {
    throw bad("memory.block_stride " + std::to_string(m.block_stride) + " < block_bytes " +
              std::to_string(m.block_bytes));
  }
  if (count > 0 && blocks == nullptr) throw bad("blocks is null");
  for (uint32_t i = 0; i < count; ++i) {
    if (!headway::sdk::block_in_region(m, blocks[i])) {
      throw bad("blocks[" + std::to_string(i) + "] = " + std::to_string(blocks[i]) +
                " lies beyond memory.bytes " + std::to_string(m.bytes) + " (block_bytes " +
                std::to_string(m.block_bytes) + ", stride " + std::to_string(m.block_stride) + ")");
    }
  }
}

struct Transfer {
  // Immutable after peer_post: the link thread reads them without the mutex.
  hw_peer_direction direction;
  hw_memory_desc memory;
  std::vector<uint32_t> blocks;
  Clock::time_point posted;
  // Guarded by the mutex.
  bool in_flight = false;  // its link thread is touching its memory: only that thread finishes it
  hw_transfer_state state = HW_TRANSFER_PENDING;
  double seconds = 0.0;
};

struct Link {
  // Immutable once the threads run.
  uint64_t handle = 0;
  int32_t rank = 0;
  bool accepts = false;        // joined one of this instance's own ids: accept, else connect
  ParsedId peer;               // where to connect, or the token to expect
  Fd listener;                 // the accepting side's listener, taken from listeners_
  Clock::time_point deadline;  // of the join
  Waker send_wake;             // for the sender thread (which also joins)
  Waker receive_wake;          // for the receiver thread
  std::thread sender;
  std::thread receiver;
  // Guarded by the mutex.
  Fd socket;  // set by the sender thread while joining; closed only after both threads are joined
  hw_transfer_state state = HW_TRANSFER_PENDING;
  std::string failure;
  bool closing = false;
  std::deque<Transfer*> sends;  // in posting order; the front may be in flight
  std::deque<Transfer*> receives;
};

class SocketPeers final : public headway::sdk::KvTransport, public headway::sdk::KvPeerLinks {
 public:
  SocketPeers(const headway::sdk::Host& host, const headway::sdk::Options& options)
      : host_(host), timeout_s_(options.get_double("timeout_s")) {}

  ~SocketPeers() override {
    std::vector<uint64_t> handles;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [handle, link] : links_) handles.push_back(handle);
    }
    for (uint64_t handle : handles) peer_close(handle);
  }

  uint64_t start(const hw_kv_transfer&) override {
    throw Error(HW_INVALID_ARGUMENT,
                "test_socket_peers moves KV over peer links only (peer_rendezvous, peer_join, "
                "peer_post), not with start()");
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    std::lock_guard lock(mutex_);
    const auto it = transfers_.find(handle);
    if (it == transfers_.end()) {
      throw Error(HW_NOT_FOUND, "test_socket_peers: no transfer " + std::to_string(handle) +
                                    " (already reported, or never posted)");
    }
    const Transfer& t = *it->second;
    if (t.state == HW_TRANSFER_PENDING) return {HW_TRANSFER_PENDING, 0.0};
    const headway::sdk::TransferProgress result{t.state, t.seconds};
    transfers_.erase(it);
    return result;
  }

  std::vector<uint8_t> peer_rendezvous() override {
    Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (listener.get() < 0) throw Error(HW_INTERNAL, "test_socket_peers: " + errno_text("socket"));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = 0;  // the kernel picks a free port
    ::inet_pton(AF_INET, std::string(kLoopback).c_str(), &address.sin_addr);
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener.get(), 4) != 0) {
      throw Error(HW_UNAVAILABLE, "test_socket_peers: " + errno_text("bind/listen"));
    }
    socklen_t length = sizeof address;
    if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw Error(HW_INTERNAL, "test_socket_peers: " + errno_text("getsockname"));
    }
    std::random_device random;
    const uint64_t token = (static_cast<uint64_t>(random()) << 32) ^ random();
    const std::string id = format_id(ntohs(address.sin_port), token);
    {
      std::lock_guard lock(mutex_);
      listeners_.emplace(id, std::move(listener));
    }
    return std::vector<uint8_t>(id.begin(), id.end());
  }

  uint64_t peer_join(const std::vector<uint8_t>& id_bytes, int32_t rank, int32_t memory_kind,
                     int32_t) override {
    if (memory_kind != HW_MEMORY_HOST) {
      throw Error(HW_INVALID_ARGUMENT, std::string("test_socket_peers: peer_join: memory kind ") +
                                           kind_name(memory_kind) + " (" +
                                           std::to_string(memory_kind) +
                                           "); this transport moves host memory only");
    }
    if (rank != 0 && rank != 1) {
      throw Error(HW_INVALID_ARGUMENT,
                  "test_socket_peers: peer_join: rank " + std::to_string(rank) + " is not 0 or 1");
    }
    const std::string id(id_bytes.begin(), id_bytes.end());
    auto link = std::make_unique<Link>();
    link->peer = parse_id(id);
    link->rank = rank;
    link->deadline = deadline_after(Clock::now(), timeout_s_);
    {
      // The first join of one of our own ids accepts on its listener; any later join of it (the
      // other rank, on this same instance) finds no listener and connects.
      std::lock_guard lock(mutex_);
      const auto it = listeners_.find(id);
      if (it != listeners_.end()) {
        link->accepts = true;
        link->listener = std::move(it->second);
        listeners_.erase(it);
      }
      link->handle = next_link_++;  // before the threads start: they name it in log messages
    }
    Link* raw = link.get();
    raw->sender = std::thread([this, raw] { sender_main(*raw); });
    try {
      raw->receiver = std::thread([this, raw] { receiver_main(*raw); });
    } catch (...) {
      stop_threads(*raw);
      throw;
    }
    std::lock_guard lock(mutex_);
    links_.emplace(raw->handle, std::move(link));
    host_.counter_add("socket_links_joined", 1.0);
    host_.gauge_set("socket_links_open", static_cast<double>(links_.size()));
    return raw->handle;
  }

  hw_transfer_state peer_state(uint64_t link) override {
    std::lock_guard lock(mutex_);
    return find_link(link).state;
  }

  uint64_t peer_post(uint64_t link_handle, hw_peer_direction direction,
                     const hw_memory_desc& memory, const uint32_t* blocks,
                     uint32_t block_count) override {
    validate_blocks(memory, blocks, block_count);
    auto transfer = std::make_unique<Transfer>();
    transfer->direction = direction;
    transfer->memory = memory;
    transfer->blocks.assign(blocks, blocks + block_count);
    std::lock_guard lock(mutex_);
    Link& link = find_link(link_handle);
    if (link.state != HW_TRANSFER_DONE) {
      throw Error(HW_UNAVAILABLE,
                  "test_socket_peers: peer_post: link " + std::to_string(link_handle) +
                      (link.state == HW_TRANSFER_PENDING ? " is still joining"
                                                         : " has failed: " + link.failure));
    }
    transfer->posted = Clock::now();
    Transfer* raw = transfer.get();
    const uint64_t handle = next_transfer_++;
    transfers_.emplace(handle, std::move(transfer));
    if (direction == HW_PEER_SEND) {
      link.sends.push_back(raw);
      link.send_wake.notify();
    } else {
      link.receives.push_back(raw);
      link.receive_wake.notify();
    }
    return handle;
  }

  void peer_close(uint64_t link_handle) noexcept override {
    std::unique_ptr<Link> link;
    {
      std::lock_guard lock(mutex_);
      const auto it = links_.find(link_handle);
      if (it == links_.end()) return;
      link = std::move(it->second);
      links_.erase(it);
      host_.gauge_set("socket_links_open", static_cast<double>(links_.size()));
    }
    stop_threads(*link);
    std::lock_guard lock(mutex_);
    // What the threads left queued never started; they are done with the rest.
    for (auto* queue : {&link->sends, &link->receives}) {
      for (Transfer* t : *queue) finish_locked(*t, HW_TRANSFER_FAILED);
    }
  }

 private:
  // The link's threads exit once it is closing; shutdown(2) also tells the peer at once.
  void stop_threads(Link& link) noexcept {
    {
      std::lock_guard lock(mutex_);
      link.closing = true;
      if (link.socket.get() >= 0) ::shutdown(link.socket.get(), SHUT_RDWR);
      link.send_wake.notify();
      link.receive_wake.notify();
    }
    if (link.sender.joinable()) link.sender.join();
    if (link.receiver.joinable()) link.receiver.join();
  }

  Link& find_link(uint64_t handle) {
    const auto it = links_.find(handle);
    if (it == links_.end()) {
      throw Error(HW_NOT_FOUND, "test_socket_peers: no link " + std::to_string(handle) +
                                    " (closed, or never joined)");
    }
    return *it->second;
  }

  void finish_locked(Transfer& t, hw_transfer_state state) {
    if (t.state != HW_TRANSFER_PENDING) return;
    t.state = state;
    t.seconds = state == HW_TRANSFER_DONE
                    ? std::chrono::duration<double>(Clock::now() - t.posted).count()
                    : 0.0;
  }

  // Marks the link FAILED and fails every queued transfer not in flight (in-flight ones are failed
  // by their threads, which are woken here).
  void break_locked(Link& link, const std::string& why) {
    if (link.state == HW_TRANSFER_FAILED) return;
    link.state = HW_TRANSFER_FAILED;
    link.failure = why;
    for (auto* queue : {&link.sends, &link.receives}) {
      std::erase_if(*queue, [&](Transfer* t) {
        if (t->in_flight) return false;
        finish_locked(*t, HW_TRANSFER_FAILED);
        return true;
      });
    }
    if (link.socket.get() >= 0) ::shutdown(link.socket.get(), SHUT_RDWR);
    link.send_wake.notify();
    link.receive_wake.notify();
  }

  // Logs `message` as an error unless the link is closing (a failure the caller asked for) or
  // already broken (a consequence, not news). It is called before the failure is recorded, so that
  // whoever sees a FAILED state also finds the reason in the log; two threads failing at once may
  // both log, which is harmless.
  void log_failure(const Link& link, const std::string& message) {
    {
      std::lock_guard lock(mutex_);
      if (link.closing || link.state == HW_TRANSFER_FAILED) return;
    }
    host_.log(HW_LOG_ERROR,
              "test_socket_peers: link " + std::to_string(link.handle) + ": " + message);
  }

  void break_link(Link& link, const std::string& why) {
    log_failure(link, "broke: " + why);
    std::lock_guard lock(mutex_);
    break_locked(link, why);
  }

  // Empty while the link may go on; otherwise why the thread must stop.
  std::string stop_reason(const Link& link) {
    std::lock_guard lock(mutex_);
    if (link.closing) return "the link was closed";
    if (link.state == HW_TRANSFER_FAILED) return "the link broke: " + link.failure;
    return "";
  }

  // Waits until `fd` has one of `events`. Empty when the caller may go on, else why not: the
  // deadline passed, or the link is closing or broken. Other wake-ups (a post) are swallowed.
  std::string await(const Link& link, const Waker& waker, int fd, short events,
                    Clock::time_point deadline) {
    for (;;) {
      switch (wait_ready(fd, events, waker, deadline)) {
        case Ready::kYes:
          return "";
        case Ready::kTimedOut:
          return "timed out after " + std::to_string(timeout_s_) + " s";
        case Ready::kWoken:
          waker.drain();
          if (std::string why = stop_reason(link); !why.empty()) return why;
          break;
      }
    }
  }

  // Sends or receives exactly `size` bytes on `fd`, waking for close and giving up at `deadline`.
  // Returns an empty string on success, else why not.
  std::string move_bytes(const Link& link, const Waker& waker, int fd, bool sending, void* data,
                         size_t size, Clock::time_point deadline) {
    auto* bytes = static_cast<char*>(data);
    while (size > 0) {
      const ssize_t n = sending ? ::send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT)
                                : ::recv(fd, bytes, size, MSG_DONTWAIT);
      if (n > 0) {
        bytes += n;
        size -= static_cast<size_t>(n);
        continue;
      }
      if (n == 0) return "the peer closed the connection";
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return errno_text(sending ? "send" : "recv");
      if (std::string why = await(link, waker, fd, sending ? POLLOUT : POLLIN, deadline);
          !why.empty()) {
        return why;
      }
    }
    return "";
  }

  // Accepts or connects, then checks the peer's token and rank. Empty on success, else why not.
  std::string join(Link& link) {
    const Waker& waker = link.send_wake;
    Fd socket;
    if (link.accepts) {
      for (;;) {
        socket = Fd(::accept4(link.listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (socket.get() >= 0) break;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
          return errno_text("accept");
        }
        if (std::string why = await(link, waker, link.listener.get(), POLLIN, link.deadline);
            !why.empty()) {
          return "waiting for the peer to connect: " + why;
        }
      }
      link.listener.reset();  // one connection per id; only this thread uses the listener
    } else {
      socket = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (socket.get() < 0) return errno_text("socket");
    }
    const int fd = socket.get();
    {
      std::lock_guard lock(mutex_);
      link.socket = std::move(socket);  // from here on, close and break can shut it down
    }
    const int one = 1;  // headers are small; do not let Nagle hold them back
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    // Hello: the id's token, then the joiner's rank; ack: one byte.
    uint8_t hello[12];
    if (link.accepts) {
      if (std::string why = move_bytes(link, waker, fd, false, hello, sizeof hello, link.deadline);
          !why.empty()) {
        return "reading the peer's hello: " + why;
      }
      uint64_t token;
      int32_t rank;
      std::memcpy(&token, hello, 8);
      std::memcpy(&rank, hello + 8, 4);
      if (token != link.peer.token) return "the peer sent a wrong token";
      if (rank == link.rank) return "both sides joined as rank " + std::to_string(rank);
      uint8_t ack = 1;
      if (std::string why = move_bytes(link, waker, fd, true, &ack, 1, link.deadline);
          !why.empty()) {
        return "sending the ack: " + why;
      }
      return "";
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(link.peer.port);
    address.sin_addr = link.peer.host;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      if (errno != EINPROGRESS) return errno_text("connect");
      if (std::string why = await(link, waker, fd, POLLOUT, link.deadline); !why.empty()) {
        return "connect: " + why;
      }
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) return std::string("connect: ") + std::strerror(error);
    }
    std::memcpy(hello, &link.peer.token, 8);
    std::memcpy(hello + 8, &link.rank, 4);
    if (std::string why = move_bytes(link, waker, fd, true, hello, sizeof hello, link.deadline);
        !why.empty()) {
      return "sending the hello: " + why;
    }
    uint8_t ack = 0;
    if (std::string why = move_bytes(link, waker, fd, false, &ack, 1, link.deadline);
        !why.empty()) {
      return "waiting for the peer's ack (wrong token or same rank?): " + why;
    }
    return "";
  }

  // The next transfer of `queue`, now in flight, or null when the link is closing or broken. The
  // receiver also watches the idle socket, so that a peer that went away breaks the link even when
  // nothing is posted; bytes that arrive early are left for the receive they belong to.
  Transfer* next_transfer(Link& link, bool receiving, int fd) {
    const Waker& waker = receiving ? link.receive_wake : link.send_wake;
    bool early_bytes = false;
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        if (link.closing || link.state == HW_TRANSFER_FAILED) return nullptr;
        auto& queue = receiving ? link.receives : link.sends;
        if (!queue.empty()) {
          queue.front()->in_flight = true;
          return queue.front();
        }
      }
      const bool watch = receiving && !early_bytes;
      if (wait_ready(watch ? fd : -1, POLLIN, waker, Clock::time_point::max()) == Ready::kWoken) {
        waker.drain();
        continue;
      }
      if (!watch) continue;
      char byte;
      const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) {
        early_bytes = true;
      } else if (n == 0) {
        break_link(link, "the peer closed the connection");
        return nullptr;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        break_link(link, errno_text("recv"));
        return nullptr;
      }
    }
  }

  std::string send_transfer(const Link& link, int fd, const Transfer& t) {
    const Clock::time_point deadline = deadline_after(t.posted, timeout_s_);
    uint64_t header[2] = {t.blocks.size(), t.memory.block_bytes};
    if (std::string why =
            move_bytes(link, link.send_wake, fd, true, header, sizeof header, deadline);
        !why.empty()) {
      return why;
    }
    return move_blocks(link, link.send_wake, fd, true, t, deadline);
  }

  std::string receive_transfer(const Link& link, int fd, const Transfer& t) {
    const Clock::time_point deadline = deadline_after(t.posted, timeout_s_);
    uint64_t header[2] = {0, 0};
    if (std::string why =
            move_bytes(link, link.receive_wake, fd, false, header, sizeof header, deadline);
        !why.empty()) {
      return why;
    }
    if (header[0] != t.blocks.size() || header[1] != t.memory.block_bytes) {
      // The stream is out of step with the posts from here on: the link cannot go on.
      return "a receive posted for " + std::to_string(t.blocks.size()) + " blocks of " +
             std::to_string(t.memory.block_bytes) + " bytes met a send of " +
             std::to_string(header[0]) + " blocks of " + std::to_string(header[1]) + " bytes";
    }
    return move_blocks(link, link.receive_wake, fd, false, t, deadline);
  }

  // Writes (sending) or reads a transfer's blocks in list order, after its header.
  std::string move_blocks(const Link& link, const Waker& wake, int fd, bool sending,
                          const Transfer& t, Clock::time_point deadline) {
    auto* base = static_cast<char*>(t.memory.base);
    for (uint32_t block : t.blocks) {
      if (std::string why =
              move_bytes(link, wake, fd, sending, base + block * t.memory.block_stride,
                         t.memory.block_bytes, deadline);
          !why.empty()) {
        return why;
      }
    }
    return "";
  }

  // Pops the in-flight transfer at the front of its queue and reports how it went; a failure
  // breaks the link, since the byte stream is no longer in step with the posts.
  void complete(Link& link, bool receiving, Transfer& t, const std::string& why) {
    if (!why.empty()) {
      log_failure(link, std::string(receiving ? "receive" : "send") + " failed: " + why);
    }
    std::lock_guard lock(mutex_);
    auto& queue = receiving ? link.receives : link.sends;
    queue.pop_front();
    t.in_flight = false;
    finish_locked(t, why.empty() ? HW_TRANSFER_DONE : HW_TRANSFER_FAILED);
    if (!why.empty()) break_locked(link, why);
  }

  void sender_main(Link& link) {
    if (std::string why = join(link); !why.empty()) {
      break_link(link, "join failed: " + why);
      return;
    }
    int fd;
    {
      std::lock_guard lock(mutex_);
      if (link.closing || link.state == HW_TRANSFER_FAILED) return;
      link.state = HW_TRANSFER_DONE;
      fd = link.socket.get();
      link.receive_wake.notify();
    }
    while (Transfer* t = next_transfer(link, false, fd)) {
      complete(link, false, *t, send_transfer(link, fd, *t));
    }
  }

  void receiver_main(Link& link) {
    int fd = -1;
    for (;;) {  // until the sender thread has joined the link (or given up)
      {
        std::lock_guard lock(mutex_);
        if (link.closing || link.state == HW_TRANSFER_FAILED) return;
        if (link.state == HW_TRANSFER_DONE) {
          fd = link.socket.get();
          break;
        }
      }
      wait_ready(-1, 0, link.receive_wake, Clock::time_point::max());
      link.receive_wake.drain();
    }
    while (Transfer* t = next_transfer(link, true, fd)) {
      complete(link, true, *t, receive_transfer(link, fd, *t));
    }
  }

  const headway::sdk::Host host_;
  const double timeout_s_;
  std::mutex mutex_;
  uint64_t next_link_ = 1;
  uint64_t next_transfer_ = 1;
  std::unordered_map<std::string, Fd> listeners_;  // ids made here and not yet joined
  std::unordered_map<uint64_t, std::unique_ptr<Link>> links_;
  // Every posted transfer until poll() reports it DONE or FAILED (links point into it).
  std::unordered_map<uint64_t, std::unique_ptr<Transfer>> transfers_;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(SocketPeers, "org.headway.test.socket_peers", "test_socket_peers",
                            "0.0.1", "Test plugin: peer links over loopback TCP, host memory only",
                            kOptions)
