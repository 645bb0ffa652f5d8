// Closes the connections of clients that hold a worker thread without sending a request, and every
// connection when the server stops. cpp-httplib 0.11 gives each connection a worker thread of a
// fixed pool and reads a request's headers with a timeout that restarts at every byte, with no
// deadline for the whole and no limit on their size: a client sending a header line a second holds
// its worker for as long as it likes (330 of them left no worker for /health), one streaming
// headers without end grows the server's memory by gigabytes, and stop() waits for every such
// connection, so one slow client kept a SIGTERM from ever finishing.
//
// Twice a second the reaper finds the server's connections among the process's descriptors (the
// sockets whose local port is the server's, as ClientConnectionWatch finds one) and, for each that
// is not inside a request, looks at how many bytes cpp-httplib has read from it since its last
// request ended (TCP_INFO's bytes received less those still queued): over `header_bytes`, or any
// for longer than `header_seconds`, and the connection is shut down, so that cpp-httplib's read
// fails and it closes the connection. A request counts from the moment its headers are parsed
// (request_began(), from the pre-routing handler) to the moment its response is written
// (request_ended(), from the logger): a streaming response is never cut, and a connection waiting
// in the pool's queue has had nothing read and is left alone. A body is another matter: cpp-httplib
// reads it before the handler, with the same restarting timeout, so a request whose handler has
// not begun `body_time` after its headers (body_received()) is cut too (helper-130's walk: 330
// connections sending one body byte every 3 s held every worker, unauthenticated).
//
// Ownership: owns its thread. Threading: request_began()/request_ended() from the server's worker
// threads, everything else from the owning thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

namespace headway::serving::http {

struct SlowClientLimits {
  // From the first byte of a request the server read (as a scan sees it) to its parsed headers,
  // beyond which a connection is closed.
  std::chrono::milliseconds header_time{std::chrono::seconds(10)};
  // Bytes read from a connection outside any request (a request line and its headers, and up to
  // cpp-httplib's 4 KiB of read-ahead into the body) beyond which it is closed.
  uint64_t header_bytes = uint64_t{64} * 1024;
  // From a request's parsed headers (request_began()) to the start of its handler
  // (body_received()), beyond which a connection is closed.
  std::chrono::milliseconds body_time{std::chrono::seconds(60)};
  std::chrono::milliseconds scan_interval{500};
};

class SlowClientReaper {
 public:
  SlowClientReaper(uint16_t port, SlowClientLimits limits);
  ~SlowClientReaper();  // stops the thread (does not shut connections down)
  SlowClientReaper(const SlowClientReaper&) = delete;
  SlowClientReaper& operator=(const SlowClientReaper&) = delete;

  // A connection by its four addresses (cpp-httplib's Request::local_addr, local_port,
  // remote_addr, remote_port): unique among live connections, where the client's alone is not (a
  // client may use one port towards two addresses of a server listening on 0.0.0.0).
  using Connection4 = std::tuple<std::string, int, std::string, int>;

  // A request's headers were parsed / its body was read (its handler begins) / its response was
  // written, on this connection.
  void request_began(const Connection4& connection);
  void body_received(const Connection4& connection);
  void request_ended(const Connection4& connection);

  // Stops scanning, then shuts down the reading side of every connection of the server: reads in
  // progress end at once, answers still being written (a stream's last event) go out. For stop().
  void shut_down_all();
  // Once the answer to the request in progress on `connection` is written (request_ended()), shuts
  // down the connection's reading side, so that cpp-httplib reads its end and closes it: for a
  // request whose body must not be read (it would be read as the next request). Shutting down
  // before the answer lost the answer. Walks the process's descriptors then: not for every request.
  void stop_reading_after_answer(const Connection4& connection);

 private:
  struct Connection {
    uint64_t inode = 0;        // of its socket, once a scan found it (0: not yet)
    uint32_t in_requests = 0;  // began less ended
    // A request ended: the next scans take read_at_idle. Two of them, so that the bytes are counted
    // after the end (a scan reads the sockets before it takes the lock).
    uint32_t baseline_scans = 0;
    uint64_t created_in_scan = 0;  // scans_ when request_began() made it
    uint64_t read_at_idle = 0;     // bytes read by then (0 for a connection without requests)
    bool reading = false;          // bytes read since, outside a request
    std::chrono::steady_clock::time_point reading_since{};
    bool reaped = false;
    bool stop_reading_after_answer = false;
    bool awaiting_body = false;  // between request_began() and body_received()
    std::chrono::steady_clock::time_point body_since{};
    uint64_t seen_in_scan = 0;  // 0: not found by a scan yet
  };

  void run();
  void scan();

  const uint16_t port_;
  const SlowClientLimits limits_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<Connection4, Connection> connections_;
  uint64_t scans_ = 0;
  std::thread thread_;
};

}  // namespace headway::serving::http
