// cpp-httplib's Server with a listen backlog fit for bursts of clients. Debian's build (0.11)
// listens with a backlog of 5, fixed at compile time: when dozens of clients connect at once the
// kernel's accept queue overflows and connections are reset. Calling listen() again on the bound
// socket raises the backlog (Linux updates it in place).
//
// Ownership/threading: as httplib::Server.
#pragma once

#include <httplib.h>

namespace headway::serving::http {

class ListeningServer : public httplib::Server {
 public:
  // After bind_to_port / bind_to_any_port. Returns false when the socket refused.
  bool raise_backlog(int backlog);
};

}  // namespace headway::serving::http
