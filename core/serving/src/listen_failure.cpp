#include <headway/serving/listen_failure.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace headway::serving {

std::string cannot_listen_message(const std::string& frontend, const std::string& where,
                                  const std::string& why, const std::string& fallback) {
  return frontend + " frontend cannot listen on " + where + ": " + (why.empty() ? fallback : why);
}

std::string why_cannot_listen(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  // A bracketed IPv6 literal ("[::1]") as a URL writes it.
  const std::string name = host.size() > 2 && host.front() == '[' && host.back() == ']'
                               ? host.substr(1, host.size() - 2)
                               : host;
  if (const int failed = ::getaddrinfo(name.c_str(), service.c_str(), &hints, &found);
      failed != 0) {
    return std::string("cannot resolve the host: ") + ::gai_strerror(failed);
  }
  int error = 0;
  const int fd = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd < 0) {
    error = errno;
  } else {
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // as the frontends bind
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0) error = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  switch (error) {
    case 0:
      return {};
    case EADDRINUSE:
      return "the port is in use";
    case EACCES:
      return "permission denied (ports below 1024 need privileges)";
    case EADDRNOTAVAIL:
      return "the host is not an address of this machine";
    default:
      return std::strerror(error);
  }
}

}  // namespace headway::serving
