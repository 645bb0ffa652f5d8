// Tells whether the client of a non-streamed request has gone away while its answer is being
// generated, so that the request is aborted as vLLM aborts it, instead of running to max_tokens
// (or, for a chat request without one, to the end of the context) for nobody. An OpenAI SDK that
// times out retries, and each retry would otherwise start one more full generation.
//
// cpp-httplib 0.11 gives a handler no access to its socket, only the connection's addresses and
// ports. A second after it is made, the watch finds the socket among the process's descriptors by
// that 4-tuple, and from then on looks once a second (gone() may be called at every poll: between
// looks it answers from the last one), peeking at the socket without blocking: end of stream (the
// client closed or shut down its side) or a reset means gone. The socket's inode is checked at
// every peek, so a descriptor number reused by another socket is never peeked at. A client that
// half-closes after its request (nc -N) counts as gone, as cpp-httplib counts it anyway.
//
// Finding the socket costs a pass over the process's descriptors (a getpeername each): about
// 0.7 ms with 600 sockets open and the connection's last, which is why the first look waits a
// second and short answers never pay it. The price: a client that resets its connection (a killed
// process) before that first look is not found (a reset socket has no
// peer address), and its request runs on; one that closes it (a timeout, FIN) is found.
//
// Ownership: borrows nothing. Threading: one handler thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace headway::serving::http {

class ClientConnectionWatch {
 public:
  // The connection as cpp-httplib reports it (Request::local_addr/local_port/remote_addr/...).
  ClientConnectionWatch(std::string local_addr, int local_port, std::string remote_addr,
                        int remote_port);

  // True once a look found the client closed or reset the connection. False while it is open,
  // between looks, and when the socket cannot be found (the watch then never claims it is gone).
  bool gone();

 private:
  // Whether `fd` is a socket connected from local_* to remote_*.
  bool is_this_connection(int fd) const;
  // Sets fd_ and inode_ when the connection's socket is among the process's descriptors.
  void find_socket();
  // One look at the connection.
  bool look();

  const std::string local_addr_, remote_addr_;
  const int local_port_, remote_port_;
  int fd_ = -1;      // the connection's socket; -1: not found (never "gone")
  ino_t inode_ = 0;  // of fd_, to tell it from another socket under the same number
  bool searched_ = false;
  std::chrono::steady_clock::time_point next_look_;
};

}  // namespace headway::serving::http
