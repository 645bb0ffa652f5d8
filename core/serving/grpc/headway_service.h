// headway.v1.Headway over a GenerationService, on gRPC's synchronous server (grpc_frontend.h says
// why): each call checks the API key, converts the request, calls the service and maps its
// ServiceError to a status. Generate streams on its handler thread and aborts the request when the
// client goes away. In an engine process it also serves and fetches staged KV (kv_stage_socket.h),
// and opens KV links and sends held KV for them (kv_links.h).
//
// Ownership: refers to the service, which must outlive it. Threading: gRPC calls the methods from
// its thread pool, concurrently; stop_calls() from the frontend's controlling thread. Its only
// mutable state is the count of calls in progress (CallGate).
#pragma once

#include <headway/serving/generation_service.h>
#include <headway/serving/grpc_frontend.h>
#include <headway/v1/headway.grpc.pb.h>

#include <chrono>
#include <string>

#include "call_gate.h"
#include "kv_stage_socket.h"

namespace headway::serving::grpc_frontend {

class HeadwayService final : public v1::Headway::Service {
 public:
  // options.api_key: empty for no authentication.
  HeadwayService(GenerationService& service, const GrpcOptions& options);

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Abort(grpc::ServerContext* context, const v1::AbortRequest* request,
                     v1::AbortResponse* response) override;
  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;
  grpc::Status ModelInfo(grpc::ServerContext* context, const v1::ModelInfoRequest* request,
                         v1::ModelInfoResponse* response) override;
  grpc::Status ClusterInfo(grpc::ServerContext* context, const v1::ClusterInfoRequest* request,
                           v1::ClusterInfoResponse* response) override;
  grpc::Status FetchKvStage(grpc::ServerContext* context, const v1::FetchKvStageRequest* request,
                            grpc::ServerWriter<v1::KvChunk>* writer) override;
  grpc::Status OpenKvLink(grpc::ServerContext* context, const v1::OpenKvLinkRequest* request,
                          v1::OpenKvLinkResponse* response) override;
  grpc::Status SendHeldKv(grpc::ServerContext* context, const v1::SendHeldKvRequest* request,
                          v1::SendHeldKvResponse* response) override;

  // Refuses later calls (UNAVAILABLE) and waits until those in progress have returned or
  // `deadline` passed. Before Server::Shutdown, so that only this service's calls get the grace
  // period, not the standard services' endless streams.
  void stop_calls(std::chrono::steady_clock::time_point deadline);

 private:
  // A call may proceed: the gate is open and the API key checks.
  grpc::Status admit(grpc::ServerContext& context, const CallGate::Pass& pass) const;

  // Sends the stream's chunks until its finish, or aborts the request when the client cancels,
  // disconnects or its deadline passes.
  grpc::Status stream_tokens(grpc::ServerContext& context, RequestStream& stream,
                             grpc::ServerWriter<v1::GenerateResponse>& writer);

  GenerationService& service_;
  const std::string api_key_;
  const bool engine_process_;
  const bool kv_stage_checksums_;
  KvStageFetcher kv_stage_fetcher_;  // used by engine processes only
  CallGate calls_;
};

}  // namespace headway::serving::grpc_frontend
