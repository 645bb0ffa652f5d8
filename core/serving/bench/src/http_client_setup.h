// The settings every httplib::Client of a benchmark gets. Private to headway_bench: it is the
// only place that needs httplib's headers next to ServerEndpoint.
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>

#include "headway/serving/bench/server_endpoint.h"

namespace headway::serving::bench {

inline void configure_client(httplib::Client& client, const ServerEndpoint& endpoint) {
  using Seconds = std::chrono::duration<double>;
  const auto micros = [](double s) {
    return std::chrono::duration_cast<std::chrono::microseconds>(Seconds(s));
  };
  client.set_connection_timeout(micros(endpoint.connect_timeout_s));
  // httplib's read timeout (5 s by default) is the longest wait for the next bytes; a long prefill
  // is silence on the stream, so it must be generous.
  client.set_read_timeout(micros(endpoint.read_timeout_s));
  client.set_write_timeout(micros(endpoint.connect_timeout_s));
  client.set_keep_alive(true);
  // cpp-httplib writes a request's headers and body separately: with Nagle's algorithm the body of
  // a request on a reused connection waits for the server's delayed ACK of the headers, about
  // 40 ms on Linux, which every TTFT and end-to-end figure would carry.
  client.set_tcp_nodelay(true);
  if (!endpoint.api_key.empty()) client.set_bearer_token_auth(endpoint.api_key);
}

// A failed exchange in words: cpp-httplib's names ("Connection", "Read") do not tell a refused
// connection from a server that went silent.
inline std::string transport_failure(httplib::Error error, const ServerEndpoint& endpoint) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect to " + endpoint.origin +
             " (nothing listens there, or it is unreachable)";
    case httplib::Error::ConnectionTimeout:
      return "connecting to " + endpoint.origin + " timed out";
    case httplib::Error::Read:
      return "reading the answer failed (the server closed the connection, or sent nothing for "
             "--timeout)";
    case httplib::Error::Write:
      return "sending the request failed (the server closed the connection)";
    default:
      return "HTTP client error: " + httplib::to_string(error);
  }
}

}  // namespace headway::serving::bench
