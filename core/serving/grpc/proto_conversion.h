// Between headway.v1 messages and the GenerationService's types. Only the wire format is checked
// here (a prompt must be set); what the values mean is the service's to validate.
//
// Threading: pure functions, callable from any thread.
#pragma once

#include <headway/serving/generation_service.h>
#include <headway/v1/headway.pb.h>

#include <string>

namespace headway::serving::grpc_frontend {

// The GenerateInput `request` asks for. Throws ServiceError (kInvalidArgument, param "prompt")
// when it cannot be expressed as one: it has no prompt.
GenerateInput to_generate_input(const v1::GenerateRequest& request);

// One streamed message for `chunk` of request `request_id`; usage, timings and the error are set
// on the last message (the one with a finish reason) only.
void to_generate_response(const std::string& request_id, const StreamChunk& chunk,
                          v1::GenerateResponse& out);

// Guided output both ways (a router process forwards what its clients asked for).
// Throws ServiceError(kInvalidArgument) naming `guided` when none of its kinds is set: a message
// the client sent is not ignored.
GuidedOutput from_proto(const v1::GuidedOutput& guided);
void to_proto(const GuidedOutput& guided, v1::GuidedOutput& out);
// KvStage both ways (a router process sends and receives it too).
KvStage from_proto(const v1::KvStage& stage);
void to_proto(const KvStage& stage, v1::KvStage& out);

// The service names a chat's JSON texts as the HTTP API does (`tools`, `chat_template_kwargs`); a
// gRPC client sent them as ChatMessages.tools_json and .template_kwargs_json. The same error with
// the proto's names, in its param and at the start of its message; any other error as it is.
ServiceError with_proto_field_names(const ServiceError& error);

void to_health_response(const HealthSummary& health, v1::HealthResponse& out);
void to_model_info_response(const ModelSummary& model, v1::ModelInfoResponse& out);
void to_cluster_info_response(const ClusterSummary& cluster, v1::ClusterInfoResponse& out);
// An engine process's KV events for the router process that asked (reports_kv_events set).
void to_kv_events(const KvEventsSince& since, v1::ClusterInfoResponse& out);

}  // namespace headway::serving::grpc_frontend
