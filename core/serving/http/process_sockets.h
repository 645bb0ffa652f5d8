// Finding cpp-httplib's sockets among the process's descriptors. cpp-httplib 0.11 gives handlers no
// socket, only a connection's addresses and ports; the connection watch (one request's client) and
// the slow-client reaper (every connection of the server) find theirs by walking /proc/self/fd.
// Stateless; thread-safe.
#pragma once

#include <sys/socket.h>

#include <functional>
#include <string>

namespace headway::serving::http {

// The port of an IPv4 or IPv6 address; -1 for another family.
int port_of(const sockaddr_storage& address);

// The numeric host of `address` as cpp-httplib writes Request::remote_addr and local_addr
// (getnameinfo, NI_NUMERICHOST), so that the strings compare equal for IPv4, IPv6 and IPv4-mapped
// addresses; empty when it has none.
std::string numeric_host(const sockaddr_storage& address, socklen_t size);

// Calls `visit` with every open descriptor of the process (not the one the walk itself holds),
// until it returns false.
void for_each_descriptor(const std::function<bool(int fd)>& visit);

}  // namespace headway::serving::http
