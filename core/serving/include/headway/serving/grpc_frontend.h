// The gRPC frontend: serves headway.v1.Headway (core/proto/headway/v1/headway.proto) over a
// GenerationService, with server reflection and the standard grpc.health.v1 health service (which
// mirrors GenerationService::health()). docs/serving_grpc.md describes the API for clients.
//
// Streaming model: gRPC's synchronous server, one thread per Generate stream. RequestStream hands
// tokens to exactly one consumer thread that blocks in next(chunk, timeout); it has no readiness
// callback, so the callback API (ServerWriteReactor) would need either a thread per stream anyway
// or a pump that polls every stream and adds its polling period to every token's latency. With the
// sync server each stream's thread waits in next() for at most kGenerationPollInterval (below),
// then checks ServerContext::IsCancelled(), so a client that disconnects is aborted within that
// period, and it sends each chunk as soon as it arrives. The cost is a thread (mostly idle, its
// stack mostly untouched) per stream: hundreds of concurrent streams, the vLLM-style load, are
// hundreds of threads. The sync server's threads are capped by a grpc::ResourceQuota
// (kMaxServerThreads); past the cap gRPC refuses new calls with RESOURCE_EXHAUSTED instead of
// exhausting the process.
//
// Authentication: with GrpcOptions::api_key set, every headway.v1.Headway call must carry the
// metadata "authorization: Bearer <key>" (compared in constant time), else UNAUTHENTICATED.
// grpc.health.v1 and reflection stay open, so that load balancers and probes need no key.
//
// Ownership: the frontend holds a reference to the service, which must outlive it.
// Threading: start(), stop() and the destructor from one controlling thread; port() from any
// thread after start() returned. RPCs run on gRPC's threads and call the service concurrently.
#pragma once

#include <headway/serving/generation_service.h>
#include <headway/serving/kv_link_peers.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace headway::serving {

// How long stop() lets in-flight calls finish before it cancels them (their requests are aborted),
// by default.
inline constexpr std::chrono::seconds kShutdownGracePeriod{5};

struct GrpcOptions {
  std::string host = "127.0.0.1";  // an IPv4/IPv6 address or a name; "0.0.0.0" for every interface
  uint16_t port = 50051;           // 0: an ephemeral port, read back with port()
  std::string api_key;             // empty: no authentication
  // An engine process ([server] role = "engine"): answers FetchKvStage with the KV it staged, and
  // fetches a kv_source stage written on another host before it submits the request
  // (disaggregation across hosts; kv_stage_socket.h). Elsewhere FetchKvStage is refused.
  bool engine_process = false;
  // Fetch kv_source stages over gRPC even when they are on this host ([server]
  // kv_stage_transport = "socket").
  bool kv_stage_always_fetch = false;
  // Checksum every chunk of staged KV this process sends ([server] kv_stage_checksums).
  bool kv_stage_checksums = false;
  // How long stop() lets headway.v1.Headway calls in progress finish before it cancels them.
  std::chrono::milliseconds shutdown_grace = kShutdownGracePeriod;
};

// How long a Generate stream's thread waits for tokens before it checks for a cancelled client.
inline constexpr std::chrono::milliseconds kGenerationPollInterval{20};
// The most threads gRPC's synchronous server may run (one per open stream, plus its pollers).
inline constexpr int kMaxServerThreads = 2048;
// Largest request accepted: gRPC's default (4 MiB) is too small for long prompts sent as text or
// as token ids (about 3 bytes per id), e.g. a 1M-token context.
inline constexpr int kMaxRequestBytes = 16 * 1024 * 1024;

// For an engine process's LocalServiceOptions::kv_link_peers: reaches the engine processes that
// hold KV for peer links over their gRPC worker API, with `api_key` (kv_link_client.h).
std::shared_ptr<KvLinkPeers> make_grpc_kv_link_peers(std::string api_key);

class GrpcFrontend {
 public:
  GrpcFrontend(GenerationService& service, GrpcOptions options);
  // Calls stop().
  ~GrpcFrontend();
  GrpcFrontend(const GrpcFrontend&) = delete;
  GrpcFrontend& operator=(const GrpcFrontend&) = delete;

  // Binds and starts serving; returns once clients can connect. Throws core::Error naming
  // host:port when it cannot bind, and when called twice or after stop() (a frontend serves once).
  void start();
  // The bound port (the ephemeral one when GrpcOptions::port was 0); 0 before start().
  uint16_t port() const;
  // Refuses new calls, lets headway.v1.Headway calls in progress finish for up to
  // GrpcOptions::shutdown_grace, then (half a second later, for the last statuses to go out)
  // cancels the rest (their requests are aborted) and the standard services' streams (health
  // Watch, reflection), and returns when every handler has returned. Idempotent; a no-op before
  // start().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headway::serving
