// The backend of a router process (`[server] role = "router"`): the deployment's router plugin in
// front of engine processes reached over gRPC (each an `headway serve` with role = "engine").
//
// What it does per request: admission and tokenization here (the same checks and messages as the
// in-process service), routing with the router plugin over every engine process's last load
// report plus what was sent to it since, then a streaming Generate call to the chosen process with
// the prompt as token ids; tokens come back onto the client's RequestStream. Stop strings are
// matched here and cancel the call upstream; a client abort cancels it too, and the engine process
// frees the request's KV blocks.
//
// Health and load: a poller thread asks every engine process for Health and ClusterInfo each
// `load_report_interval_s`. A process that fails a poll or a call (UNAVAILABLE) is marked down:
// its in-flight requests finish with an error naming it, the router plugin sees it as not alive
// (new requests go elsewhere), and a later successful poll brings it back.
//
// Ownership: owns the engine-process channels, the router plugin instance and the calls in
// flight. Threading: every GenerationService method is safe from any thread; construct and
// destroy on one thread.
#pragma once

#include <headway/core/deployment_config.h>
#include <headway/serving/generation_service.h>

#include <atomic>
#include <memory>
#include <string>

namespace headway::serving {

struct RemoteServiceOptions {
  std::string model_name;  // empty: [server] served_model_name, else the checkpoint directory's
  std::string api_key;     // sent to the engine processes (they share the deployment's key)
  // How long the constructor waits for at least one engine process to answer.
  double connect_timeout_s = 30.0;
  // Borrowed, may be null: once another thread sets it (serve, on a signal during start-up), the
  // constructor stops waiting for the engine processes and throws core::Error.
  const std::atomic<bool>* stop_connecting = nullptr;
};

class RemoteGenerationService final : public GenerationService {
 public:
  // Reads the tokenizer of the [model] checkpoint (the model itself is not loaded here), waits up
  // to connect_timeout_s for the engine processes, checks they serve one model (same vocabulary
  // and tokenizer kind), and starts the poller. Throws core::Error naming the deployment file when
  // no engine process answers in time (each one's reason is listed) or when they disagree.
  explicit RemoteGenerationService(const core::DeploymentConfig& deployment,
                                   const RemoteServiceOptions& options = {});
  // Cancels what is still in flight (streams finish kAbort) and stops the poller.
  ~RemoteGenerationService() override;
  RemoteGenerationService(const RemoteGenerationService&) = delete;
  RemoteGenerationService& operator=(const RemoteGenerationService&) = delete;

  std::shared_ptr<RequestStream> submit(GenerateInput input) override;
  bool abort(const std::string& request_id) override;
  bool abort(const RequestStream& stream) override;
  ModelSummary model_info() const override;
  std::vector<int32_t> tokenize(const GenerateInput& input) const override;
  std::string detokenize(const std::string& model, std::span<const int32_t> ids) const override;
  ClusterSummary cluster_info() const override;
  HealthSummary health() const override;
  ServiceTotals totals() const override;
  std::string metrics_text() const override;
  void count_refused_request() override;
  void count_unauthorized_request() override;
  size_t drain(double timeout_seconds) override;
  void end_drain_now() override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headway::serving
