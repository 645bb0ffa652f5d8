#include "process_sockets.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstdlib>

namespace headway::serving::http {

int port_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return -1;
}

std::string numeric_host(const sockaddr_storage& address, socklen_t size) {
  char host[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&address), size, host, sizeof host, nullptr,
                    0, NI_NUMERICHOST) != 0) {
    return {};
  }
  return host;
}

void for_each_descriptor(const std::function<bool(int fd)>& visit) {
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return;
  while (const dirent* entry = ::readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == ::dirfd(fds)) continue;
    if (!visit(static_cast<int>(fd))) break;
  }
  ::closedir(fds);
}

}  // namespace headway::serving::http
