// The in-process backend of `headway serve`: a core::Cluster of engines, each stepped by a driver
// thread of its own, behind the GenerationService seam.
//
// Threads and locks:
// - one driver thread per engine owns its Engine outright (every Engine call happens there); it
//   takes submissions and aborts from an inbox (a mutex-protected vector swapped once per loop
//   iteration), steps the engine with no lock held, publishes the engine's load, and sleeps on a
//   condition variable while the engine has nothing to do;
// - frontend threads call submit()/abort(): validation and tokenization run on the caller's thread
//   with no lock; routing (the deployment's router plugin over the loads the drivers published,
//   plus what is still in their inboxes) and the duplicate-id check run under the service mutex;
// - tokens reach the client through the request's RequestStream (pushed on the driver thread,
//   decoded to text on the consumer's thread).
// Lock order: service mutex, then a driver's inbox mutex; a driver never holds its inbox mutex
// while taking the service mutex.
//
// Disaggregated deployments ([kv_transport], prefill and decode engines): the prefill engine's
// driver hands each prefilled request to the decode engine's driver, which reserves its blocks,
// has the transport copy the KV, continues the request, and tells the prefill driver to free its
// copy (kv_handoff.h). Aborts go to both drivers.
//
// Scope: models that run on the wall clock (e.g. `cpu`); a simulated model is refused at
// construction (`headway simulate` serves it).
//
// Ownership: the service owns the cluster, the tokenizer and the chat template; streams it hands
// out keep what their decoder needs alive. Threading: every GenerationService method is safe from
// any thread; construct and destroy on one thread.
#pragma once

#include <headway/core/deployment_config.h>
#include <headway/core/step_trace.h>
#include <headway/serving/generation_service.h>
#include <headway/serving/kv_link_peers.h>

#include <memory>
#include <string>

namespace headway::serving {

struct LocalServiceOptions {
  std::string model_name;  // empty: [server] served_model_name, else the checkpoint directory's
  // Engine processes: how this process reaches the engine processes that hold KV for peer links
  // (kv_link_peers.h); null: it pulls no held KV (such requests are prefilled here).
  std::shared_ptr<KvLinkPeers> kv_link_peers;
  // `serve --step-trace`: every engine's driver writes each step it runs here (step_trace.h);
  // null: no trace. A write that fails is logged once and ends the trace, not the engine.
  std::shared_ptr<core::StepTraceWriter> step_trace;
};

class LocalGenerationService final : public GenerationService {
 public:
  // Creates the engines (loads the model), the tokenizer and chat template of the checkpoint (when
  // the model option `path` names one; without it only token-id prompts are served), and starts
  // one driver thread per engine. Throws core::Error naming the deployment file on a virtual-clock
  // model or a tokenizer that does not match the model's vocabulary.
  explicit LocalGenerationService(const core::DeploymentConfig& deployment,
                                  LocalServiceOptions options = {});
  // Aborts whatever is still in flight (streams finish with kAbort) and joins the drivers.
  ~LocalGenerationService() override;
  LocalGenerationService(const LocalGenerationService&) = delete;
  LocalGenerationService& operator=(const LocalGenerationService&) = delete;

  std::shared_ptr<RequestStream> submit(GenerateInput input) override;
  bool abort(const std::string& request_id) override;
  bool abort(const RequestStream& stream) override;
  ModelSummary model_info() const override;
  std::vector<int32_t> tokenize(const GenerateInput& input) const override;
  std::string detokenize(const std::string& model, std::span<const int32_t> ids) const override;
  ClusterSummary cluster_info() const override;
  // An engine process's ([server] role = "engine") engines' KV events; nullopt elsewhere.
  std::optional<KvEventsSince> kv_events_since(uint64_t from) override;
  HealthSummary health() const override;
  ServiceTotals totals() const override;
  std::string metrics_text() const override;
  void count_refused_request() override;
  void count_unauthorized_request() override;
  size_t drain(double timeout_seconds) override;
  void end_drain_now() override;
  void open_kv_link(const std::string& link_name, const std::vector<uint8_t>& rendezvous) override;
  void send_held_kv(const std::string& link_name, const KvStage& held, bool drop) override;

  // Requests submitted and not yet finished (and forgotten by their driver). Once it reads 0,
  // cluster_info() reflects every finish (drivers publish their load before forgetting), except
  // that a prefill engine may free its copy of a moved request's KV a moment later.
  size_t in_flight() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headway::serving
