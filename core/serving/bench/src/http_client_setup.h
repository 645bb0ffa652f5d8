// The settings every httplib::Client of a benchmark gets. Private to headway_bench: it is the
// only place that needs httplib's headers next to ServerEndpoint.
#pragma once

#include <httplib.h>

#include <chrono>

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
  if (!endpoint.api_key.empty()) client.set_bearer_token_auth(endpoint.api_key);
}

}  // namespace headway::serving::bench
