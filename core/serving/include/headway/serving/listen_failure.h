// Why a frontend cannot listen on host:port. cpp-httplib and gRPC only say that binding failed;
// the same bind tried again on a socket of our own gives the system's reason, for the one-line
// error that names host:port.
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace headway::serving {

// "the port is in use", "permission denied (ports below 1024 need privileges)", "the host is not
// an address of this machine", "cannot resolve the host: ...", or the system's message. Empty when
// the bind succeeds now (the server failed for another reason, or the port was freed since).
std::string why_cannot_listen(const std::string& host, uint16_t port);

// The one message for it: "<frontend> frontend cannot listen on <where>: <why>", `fallback` as the
// reason when the bind tried again succeeds (`why` empty).
std::string cannot_listen_message(const std::string& frontend, const std::string& where,
                                  const std::string& why, const std::string& fallback = "");

}  // namespace headway::serving
