// KvLinkPeers over the gRPC worker API: OpenKvLink and SendHeldKv calls to the engine process that
// holds a request's KV ([server] kv_handoff = "link", kv_links.h), with the deployment's API key.
//
// Threading: safe from any thread (the channel cache is locked; each call has its own context).
#pragma once

#include <headway/serving/kv_link_peers.h>

#include <chrono>
#include <string>
#include <vector>

#include "channel_cache.h"

namespace headway::serving::grpc_frontend {

// How long one OpenKvLink call may take: the callee waits up to a minute for a link to come up.
inline constexpr std::chrono::seconds kKvLinkCallTimeout{90};
// How long one SendHeldKv call may take: the holder only posts the send (within one engine step),
// so a holder silent this long is frozen or cut off, and the caller stops waiting on it sooner.
inline constexpr std::chrono::seconds kSendHeldKvTimeout{30};

class GrpcKvLinkPeers final : public KvLinkPeers {
 public:
  explicit GrpcKvLinkPeers(std::string api_key) : api_key_(std::move(api_key)) {}

  void open_link(const std::string& address, const std::string& link_name,
                 const std::vector<uint8_t>& rendezvous) override;
  void send_held(const std::string& address, const std::string& link_name, const KvStage& held,
                 bool drop) override;

 private:
  void prepare(grpc::ClientContext& context, std::chrono::seconds timeout) const;

  const std::string api_key_;
  ChannelCache channels_;
};

}  // namespace headway::serving::grpc_frontend
