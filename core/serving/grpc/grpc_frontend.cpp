#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <headway/core/error.h>
#include <headway/serving/grpc_frontend.h>
#include <headway/serving/listen_failure.h>

#include <atomic>
#include <mutex>
#include <utility>

#include "headway_service.h"
#include "health_mirror.h"
#include "kv_link_client.h"

namespace headway::serving {

namespace {

// How often the grpc.health.v1 status is re-read from the service.
constexpr std::chrono::milliseconds kHealthRefreshPeriod{500};
// How long stop() lets calls whose handlers have returned send their status before it cancels
// every call left (a status cancelled on its way reaches the client as CANCELLED).
constexpr std::chrono::milliseconds kShutdownFlushWindow{500};

// Both are process-wide switches read when a server is built; set them once, whichever frontend
// starts first (InitProtoReflectionServerBuilderPlugin is not thread-safe).
void enable_process_wide_grpc_plugins() {
  static std::once_flag once;
  std::call_once(once, [] {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
}

// "host:port", bracketing IPv6 literals ("[::1]:50051").
std::string listen_address(const std::string& host, uint16_t port) {
  const bool ipv6_literal = host.find(':') != std::string::npos && host.front() != '[';
  return (ipv6_literal ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

struct GrpcFrontend::Impl {
  enum class State { kIdle, kServing, kStopped };

  Impl(GenerationService& service, GrpcOptions options)
      : service(service), options(std::move(options)) {}

  GenerationService& service;
  const GrpcOptions options;
  State state = State::kIdle;
  std::atomic<uint16_t> port{0};
  // Destroyed in reverse order: the mirror before the server whose health service it writes, the
  // server before the service implementation it calls.
  std::unique_ptr<grpc_frontend::HeadwayService> headway;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc_frontend::HealthMirror> health_mirror;
};

GrpcFrontend::GrpcFrontend(GenerationService& service, GrpcOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {}

GrpcFrontend::~GrpcFrontend() { stop(); }

void GrpcFrontend::start() {
  Impl& impl = *impl_;
  const std::string address = listen_address(impl.options.host, impl.options.port);
  if (impl.state != Impl::State::kIdle) {
    throw core::Error("gRPC frontend on " + address +
                      ": start() called twice or after stop(); a frontend serves once");
  }
  if (impl.options.host.empty()) {
    throw core::Error("gRPC frontend: the host is empty (listen address \"" + address +
                      "\"); use an address such as 127.0.0.1 or 0.0.0.0");
  }
  enable_process_wide_grpc_plugins();

  impl.headway = std::make_unique<grpc_frontend::HeadwayService>(impl.service, impl.options);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(impl.headway.get());
  grpc::ResourceQuota quota("headway-grpc-frontend");
  quota.SetMaxThreads(kMaxServerThreads);
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  // gRPC sets SO_REUSEPORT by default, so a second server on a taken port would bind and silently
  // share its traffic; refuse instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl.server = builder.BuildAndStart();
  if (impl.server == nullptr || bound_port == 0) {
    impl.server.reset();
    impl.headway.reset();
    const std::string why = why_cannot_listen(impl.options.host, impl.options.port);
    throw core::Error(cannot_listen_message("gRPC", address, why, "gRPC could not bind it"),
                      HW_UNAVAILABLE);
  }
  impl.port = static_cast<uint16_t>(bound_port);
  if (grpc::HealthCheckServiceInterface* health = impl.server->GetHealthCheckService()) {
    impl.health_mirror = std::make_unique<grpc_frontend::HealthMirror>(
        impl.service, *health, v1::Headway::service_full_name(), kHealthRefreshPeriod);
  }
  impl.state = Impl::State::kServing;
}

uint16_t GrpcFrontend::port() const { return impl_->port; }

void GrpcFrontend::stop() {
  Impl& impl = *impl_;
  if (impl.state != Impl::State::kServing) return;
  impl.health_mirror.reset();  // before Shutdown, which sets every health status to NOT_SERVING
  // Headway's calls in progress get the grace period. Shutdown then cancels what is left after
  // kShutdownFlushWindow, in which calls whose handlers just returned send their last messages and
  // status: those past the grace (Generate handlers notice within kGenerationPollInterval, abort
  // their requests and return), and the standard services' streams, which never end by themselves
  // and so cost a stop this window, not the whole grace.
  impl.headway->stop_calls(std::chrono::steady_clock::now() + impl.options.shutdown_grace);
  impl.server->Shutdown(std::chrono::system_clock::now() + kShutdownFlushWindow);
  impl.server->Wait();
  impl.server.reset();
  impl.headway.reset();
  impl.state = Impl::State::kStopped;
}

std::shared_ptr<KvLinkPeers> make_grpc_kv_link_peers(std::string api_key) {
  return std::make_shared<grpc_frontend::GrpcKvLinkPeers>(std::move(api_key));
}

}  // namespace headway::serving
