#include "headway_service.h"

#include <headway/serving/grpc_frontend.h>

#include <chrono>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "api_key_check.h"
#include "kv_stage_file.h"
#include "proto_conversion.h"
#include "request_validation.h"
#include "status_mapping.h"

namespace headway::serving::grpc_frontend {

namespace {

// Trailing metadata with the request field a refusal is about, for clients that want it without
// parsing the message.

grpc::Status refused(grpc::ServerContext& context, const ServiceError& service_error) {
  const ServiceError error = with_proto_field_names(service_error);
  if (!error.param().empty()) context.AddTrailingMetadata(kErrorParamMetadata, error.param());
  return to_grpc_status(error);
}

// Aborts `stream`'s request (not a later one under its id), ignoring what the service throws:
// called on paths that already report a failure.
void abort_quietly(GenerationService& service, const RequestStream& stream) {
  try {
    service.abort(stream);
  } catch (const std::exception&) {
  }
}

// A hand-off's KV that its router will never take: a staged object is removed; KV held in this
// process's engine (kv_handoff = "link") is dropped now, not when kv_link_hold_s runs out.
void let_go_of_stage(GenerationService& service, const KvStage& stage) {
  abandon_kv_stage(stage, [&service](const KvStage& held) {
    try {
      service.send_held_kv("", held, /*drop=*/true);
    } catch (const std::exception&) {
      // Already sent, dropped or expired: nothing held any more.
    }
  });
}

grpc::Status internal_error(const char* method, const std::exception& error) {
  return {grpc::StatusCode::INTERNAL, std::string(method) + " failed: " + error.what()};
}

// Runs `body` (a call into the service) and turns what it throws into a status.
template <typename Body>
grpc::Status guarded(grpc::ServerContext& context, const char* method, Body&& body) {
  try {
    return body();
  } catch (const ServiceError& error) {
    return refused(context, error);
  } catch (const std::exception& error) {
    return internal_error(method, error);
  }
}

}  // namespace

grpc::Status HeadwayService::admit(grpc::ServerContext& context, const CallGate::Pass& pass) const {
  if (!pass) return {grpc::StatusCode::UNAVAILABLE, "the server is shutting down"};
  grpc::Status key = check_api_key(context, api_key_);
  if (!key.ok()) service_.count_unauthorized_request();
  return key;
}

void HeadwayService::stop_calls(std::chrono::steady_clock::time_point deadline) {
  calls_.close_and_wait(deadline);
}

HeadwayService::HeadwayService(GenerationService& service, const GrpcOptions& options)
    : service_(service),
      api_key_(options.api_key),
      engine_process_(options.engine_process),
      kv_stage_checksums_(options.kv_stage_checksums),
      kv_stage_fetcher_(options.api_key, options.kv_stage_always_fetch) {}

grpc::Status HeadwayService::Generate(grpc::ServerContext* context,
                                      const v1::GenerateRequest* request,
                                      grpc::ServerWriter<v1::GenerateResponse>* writer) {
  const CallGate::Pass pass(calls_);
  if (grpc::Status admitted = admit(*context, pass); !admitted.ok()) return admitted;
  GenerateInput input;
  try {
    input = to_generate_input(*request);
  } catch (const ServiceError& error) {
    service_.count_refused_request();  // refused here, not by submit(): counted all the same
    return refused(*context, error);
  }
  // Before submitting, on this call's own thread: the engine's driver only copies bytes that are
  // already on this host, it never waits for the network.
  if (input.kv_source && engine_process_) {
    kv_stage_fetcher_.make_readable(*input.kv_source, service_.model_info(), context);
    // The router gave the request up while its KV was on the way: nothing to prefill or decode.
    if (context->IsCancelled()) return {grpc::StatusCode::CANCELLED, "the caller went away"};
  }
  std::shared_ptr<RequestStream> stream;
  grpc::Status submitted = guarded(*context, "Generate", [&] {
    stream = service_.submit(std::move(input));
    return grpc::Status::OK;
  });
  if (!submitted.ok()) return submitted;
  if (stream == nullptr) {
    return {grpc::StatusCode::INTERNAL, "Generate failed: the service returned no stream"};
  }
  try {
    if (engine_process_) {
      // Accepted: the router can answer its client's HTTP stream with a 200 now, not at the
      // first token (which may be a long prefill away).
      context->AddInitialMetadata(kAcceptedMetadata, "1");
      writer->SendInitialMetadata();
    }
    return stream_tokens(*context, *stream, *writer);
  } catch (const std::exception& error) {
    // Whatever failed (decoding the tokens, a service bug), the request must not run on unseen.
    abort_quietly(service_, *stream);
    return internal_error("Generate", error);
  }
}

grpc::Status HeadwayService::stream_tokens(grpc::ServerContext& context, RequestStream& stream,
                                           grpc::ServerWriter<v1::GenerateResponse>& writer) {
  StreamChunk chunk;
  v1::GenerateResponse response;
  while (true) {
    // Checked between waits, not only after a failed Write: a client that disconnects while the
    // request is still queued (no tokens yet) must free its place too.
    if (context.IsCancelled()) {
      abort_quietly(service_, stream);
      // A prefill that had already finished left its hand-off in the stream.
      if (stream.next(chunk, std::chrono::milliseconds(0)) && chunk.kv_stage) {
        let_go_of_stage(service_, *chunk.kv_stage);
      }
      return {grpc::StatusCode::CANCELLED, "the client cancelled the call"};
    }
    if (!stream.next(chunk, kGenerationPollInterval)) continue;
    // Refused by the engine process behind this one (before any token): the caller gets the
    // refusal's code, as if this service had refused it at submit.
    if (chunk.finish == Finish::kError && chunk.refusal) return refused(context, *chunk.refusal);
    to_generate_response(stream.id(), chunk, response);
    const bool last = chunk.finish != Finish::kNone;
    if (!writer.Write(response)) {
      // The client is gone; a request that finished anyway needs no abort, and abort() of one
      // that is no longer in flight is a harmless false. A staged KV it was to receive goes.
      if (!last) abort_quietly(service_, stream);
      if (chunk.kv_stage) let_go_of_stage(service_, *chunk.kv_stage);
      return {grpc::StatusCode::CANCELLED, "the client went away while tokens were being sent"};
    }
    if (last) return grpc::Status::OK;
  }
}

grpc::Status HeadwayService::Abort(grpc::ServerContext* context, const v1::AbortRequest* request,
                                   v1::AbortResponse* response) {
  const CallGate::Pass pass(calls_);
  if (grpc::Status admitted = admit(*context, pass); !admitted.ok()) return admitted;
  if (request->request_id().empty()) {
    return refused(*context, ServiceError(ErrorCode::kInvalidArgument,
                                          "required (the id from the GenerateResponse messages)",
                                          "request_id"));
  }
  return guarded(*context, "Abort", [&] {
    validate_request_id(request->request_id());  // as Generate checks it
    response->set_found(service_.abort(request->request_id()));
    return grpc::Status::OK;
  });
}

grpc::Status HeadwayService::Health(grpc::ServerContext* context, const v1::HealthRequest*,
                                    v1::HealthResponse* response) {
  const CallGate::Pass pass(calls_);
  if (grpc::Status admitted = admit(*context, pass); !admitted.ok()) return admitted;
  return guarded(*context, "Health", [&] {
    to_health_response(service_.health(), *response);
    return grpc::Status::OK;
  });
}

grpc::Status HeadwayService::ModelInfo(grpc::ServerContext* context, const v1::ModelInfoRequest*,
                                       v1::ModelInfoResponse* response) {
  const CallGate::Pass pass(calls_);
  if (grpc::Status admitted = admit(*context, pass); !admitted.ok()) return admitted;
  return guarded(*context, "ModelInfo", [&] {
    to_model_info_response(service_.model_info(), *response);
    return grpc::Status::OK;
  });
}

grpc::Status HeadwayService::ClusterInfo(grpc::ServerContext* context,
                                         const v1::ClusterInfoRequest* request,
                                         v1::ClusterInfoResponse* response) {
  const CallGate::Pass pass(calls_);
  if (grpc::Status admitted = admit(*context, pass); !admitted.ok()) return admitted;
  return guarded(*context, "ClusterInfo", [&] {
    to_cluster_info_response(service_.cluster_info(), *response);
    if (request->has_kv_events_from()) {
      if (std::optional<KvEventsSince> since =
              service_.kv_events_since(request->kv_events_from())) {
        to_kv_events(*since, *response);
      }
    }
    return grpc::Status::OK;
  });
}

grpc::Status HeadwayService::FetchKvStage(grpc::ServerContext* context,
                                          const v1::FetchKvStageRequest* request,
                                          grpc::ServerWriter<v1::KvChunk>* writer) {
  const CallGate::Pass pass(calls_);
  if (grpc::Status admitted = admit(*context, pass); !admitted.ok()) return admitted;
  if (!engine_process_) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "FetchKvStage is for engine processes behind a router ([server] role = \"engine\")"};
  }
  return send_kv_stage(request->shm_name(), kv_stage_checksums_, *context, *writer);
}

grpc::Status HeadwayService::OpenKvLink(grpc::ServerContext* context,
                                        const v1::OpenKvLinkRequest* request,
                                        v1::OpenKvLinkResponse* /*response*/) {
  const CallGate::Pass pass(calls_);
  if (grpc::Status admitted = admit(*context, pass); !admitted.ok()) return admitted;
  return guarded(*context, "OpenKvLink", [&] {
    const std::string& id = request->rendezvous();
    service_.open_kv_link(request->link_name(), std::vector<uint8_t>(id.begin(), id.end()));
    return grpc::Status::OK;
  });
}

grpc::Status HeadwayService::SendHeldKv(grpc::ServerContext* context,
                                        const v1::SendHeldKvRequest* request,
                                        v1::SendHeldKvResponse* /*response*/) {
  const CallGate::Pass pass(calls_);
  if (grpc::Status admitted = admit(*context, pass); !admitted.ok()) return admitted;
  return guarded(*context, "SendHeldKv", [&] {
    service_.send_held_kv(request->link_name(), from_proto(request->kv_stage()), request->drop());
    return grpc::Status::OK;
  });
}

}  // namespace headway::serving::grpc_frontend
