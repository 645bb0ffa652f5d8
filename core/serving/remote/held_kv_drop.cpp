#include "held_kv_drop.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <string>

#include "proto_conversion.h"

namespace headway::serving {
namespace {

// A drop is a lookup and a flag in the holder: it answers at once unless the process is gone.
constexpr std::chrono::seconds kDropDeadline{5};

struct DropCall {
  grpc::ClientContext context;
  v1::SendHeldKvRequest request;
  v1::SendHeldKvResponse response;
};

}  // namespace

void drop_held_kv(EngineProcess& holder, const KvStage& stage) {
  auto call = std::make_shared<DropCall>();
  holder.prepare(call->context);
  call->context.set_deadline(std::chrono::system_clock::now() + kDropDeadline);
  call->request.set_drop(true);
  grpc_frontend::to_proto(stage, *call->request.mutable_kv_stage());
  // The callback owns the call's state: it is freed once gRPC has run it.
  holder.stub().async()->SendHeldKv(
      &call->context, &call->request, &call->response,
      [call, index = holder.index()](const grpc::Status& status) {
        if (!status.ok() && status.error_code() != grpc::StatusCode::NOT_FOUND) {
          spdlog::debug("dropping held KV \"{}\" in engine{}: {}",
                        call->request.kv_stage().shm_name(), index, status.error_message());
        }
      });
}

}  // namespace headway::serving
