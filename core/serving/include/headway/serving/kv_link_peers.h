// How a decode engine process reaches the engine process that holds a request's KV when the
// deployment moves KV over peer links of the KV transports ([server] kv_handoff = "link", e.g.
// NCCL between the GPUs of two processes): the gRPC worker API in a deployment
// (grpc_frontend.h's make_grpc_kv_link_peers), the other service's methods directly in tests.
//
// Threading: called from the decode process's link threads (kv_links.h), concurrently for
// different addresses; implementations synchronise themselves.
#pragma once

#include <headway/serving/request_stream.h>

#include <cstdint>
#include <string>
#include <vector>

namespace headway::serving {

// Thrown by a KvLinkPeers call that the other process did not answer in time (frozen, cut off):
// the caller gives up on that process for a while, not only on the link.
class PeerNotAnswering : public ServiceError {
 public:
  using ServiceError::ServiceError;
};

class KvLinkPeers {
 public:
  virtual ~KvLinkPeers() = default;
  // Asks the process at `address` to join `rendezvous` as rank 0 of link `link_name` (this process
  // joins as rank 1). Throws ServiceError naming why it refused or could not be reached.
  virtual void open_link(const std::string& address, const std::string& link_name,
                         const std::vector<uint8_t>& rendezvous) = 0;
  // Asks it to post the send of held KV `held` on `link_name` (drop: to free it instead); returns
  // once posted. Throws ServiceError (kNotFound: no such held KV, the link is fine; kUnavailable:
  // no such link, or it failed, or the process cannot be reached), PeerNotAnswering when the
  // process did not answer within the call's deadline.
  virtual void send_held(const std::string& address, const std::string& link_name,
                         const KvStage& held, bool drop) = 0;
};

}  // namespace headway::serving
