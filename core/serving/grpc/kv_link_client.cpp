#include "kv_link_client.h"

#include <headway/v1/headway.grpc.pb.h>

#include "proto_conversion.h"
#include "status_mapping.h"

namespace headway::serving::grpc_frontend {

void GrpcKvLinkPeers::prepare(grpc::ClientContext& context, std::chrono::seconds timeout) const {
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  if (!api_key_.empty()) context.AddMetadata("authorization", "Bearer " + api_key_);
}

void GrpcKvLinkPeers::open_link(const std::string& address, const std::string& link_name,
                                const std::vector<uint8_t>& rendezvous) {
  grpc::ClientContext context;
  prepare(context, kKvLinkCallTimeout);
  v1::OpenKvLinkRequest request;
  request.set_link_name(link_name);
  request.set_rendezvous(std::string(rendezvous.begin(), rendezvous.end()));
  v1::OpenKvLinkResponse response;
  const grpc::Status status =
      v1::Headway::Stub(channels_.channel_to(address)).OpenKvLink(&context, request, &response);
  if (!status.ok()) throw from_grpc_status(status, "OpenKvLink to " + address);
}

void GrpcKvLinkPeers::send_held(const std::string& address, const std::string& link_name,
                                const KvStage& held, bool drop) {
  grpc::ClientContext context;
  prepare(context, kSendHeldKvTimeout);
  v1::SendHeldKvRequest request;
  request.set_link_name(link_name);
  to_proto(held, *request.mutable_kv_stage());
  request.set_drop(drop);
  v1::SendHeldKvResponse response;
  const grpc::Status status =
      v1::Headway::Stub(channels_.channel_to(address)).SendHeldKv(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    const ServiceError error = from_grpc_status(status, "SendHeldKv to " + address);
    throw PeerNotAnswering(error.code(), error.what());
  }
  if (!status.ok()) throw from_grpc_status(status, "SendHeldKv to " + address);
}

}  // namespace headway::serving::grpc_frontend
