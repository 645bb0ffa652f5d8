#include "listening_server.h"

#include <sys/socket.h>

namespace headway::serving::http {

bool ListeningServer::raise_backlog(int backlog) {
  const socket_t socket = svr_sock_.load();
  return socket != INVALID_SOCKET && ::listen(socket, backlog) == 0;
}

}  // namespace headway::serving::http
