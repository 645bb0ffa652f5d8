// Keeps the standard grpc.health.v1 service (gRPC's default health service) in step with
// GenerationService::health(): SERVING while the service says so, NOT_SERVING while it drains or
// has no engine alive. A background thread re-reads health() every `period`, so probes and Watch
// streams see a change within one period.
//
// Ownership: refers to the service and the health service, which must outlive it.
// Threading: the constructor sets the first status synchronously and starts the thread; the
// destructor stops and joins it. Not copyable.
#pragma once

#include <grpcpp/health_check_service_interface.h>
#include <headway/serving/generation_service.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace headway::serving::grpc_frontend {

class HealthMirror {
 public:
  // `service_name`: the gRPC service reported besides the server as a whole ("").
  HealthMirror(GenerationService& service, grpc::HealthCheckServiceInterface& health,
               std::string service_name, std::chrono::milliseconds period);
  ~HealthMirror();
  HealthMirror(const HealthMirror&) = delete;
  HealthMirror& operator=(const HealthMirror&) = delete;

 private:
  void refresh();  // mirror thread, and the constructor before the thread starts
  void run();

  GenerationService& service_;
  grpc::HealthCheckServiceInterface& health_;
  const std::string service_name_;
  const std::chrono::milliseconds period_;
  std::optional<bool> published_;  // mirror thread only (after the constructor)

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace headway::serving::grpc_frontend
