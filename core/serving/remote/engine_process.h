// The router process's view of one engine process: its gRPC channel, the health and load it last
// reported, and what the router sent it since, so that routing between two reports still sees the
// requests it just placed there.
//
// An engine process is "up" once it answered Health (serving) and ClusterInfo within the poll
// deadline, "down" from the first failed poll (the second late one in a row: a busy process may
// miss one deadline) or failed call until a poll succeeds again. A process that answers Health as
// draining (a SIGTERM) is down for new requests but "draining": its streams go on, and the router
// does not give up its calls while it answers so. The process may run several engines of its own;
// the router sees their sum as one engine.
//
// Ownership: owns its channel and stub. Threading: poll() runs on the service's poller thread
// only; every other method is safe from any thread (one mutex guards the report).
#pragma once

#include <grpcpp/grpcpp.h>
#include <headway/abi.h>
#include <headway/core/kv_event_log.h>
#include <headway/serving/generation_service.h>
#include <headway/v1/headway.grpc.pb.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "expected_handoffs.h"

namespace headway::serving {

class EngineProcess {
 public:
  // `api_key`: sent as "authorization: Bearer <key>" on every call (empty: none).
  // `role` (hw_engine_role) is what the router's file says the process does.
  EngineProcess(uint32_t index, std::string pool, int32_t role, std::string address,
                std::string api_key);

  uint32_t index() const { return index_; }
  const std::string& pool() const { return pool_; }
  const std::string& address() const { return address_; }
  v1::Headway::Stub& stub() { return *stub_; }

  // Sets the metadata every call to this engine process carries.
  void prepare(grpc::ClientContext& context) const;

  // Why a process that answers may still not serve: empty when its model is fine.
  using ModelCheck = std::function<std::string(const ModelSummary& model)>;

  // Asks the process for its health and load (and its model, the first time it answers and
  // whenever it was down), with `deadline` per call. Returns true when the process is up: it
  // answered, and `check` (when given) found nothing wrong with its model, before it counts as up
  // (no request is routed to a process whose model is refused).
  bool poll(std::chrono::milliseconds deadline, const ModelCheck& check = nullptr);

  // The load the router plugin sees: the last report plus the requests sent since; alive is 0
  // while the process is down. `pool` points into this object.
  hw_engine_load load() const;
  // What the process admits, as of its last report (0s before its first).
  hw_engine_limits limits() const;
  bool up() const;
  // Not up, but answered its last poll as draining: its calls in flight are still being served.
  bool draining() const;
  // Whether the process caches prompt beginnings, as its last answer said (some live engine with
  // prefix_caching on, or a process too old to say); true until it answered.
  bool caches_prefixes() const;
  int32_t role() const { return role_; }  // hw_engine_role
  // Why the process is down (empty while it is up).
  std::string down_reason() const;
  // The model the process serves, once it answered ModelInfo.
  std::optional<ModelSummary> model() const;
  // The last report, for ClusterInfo.
  EngineSummary summary() const;
  // Its plugins' metrics as of the last report (the process's own labels).
  std::vector<PluginMetricSample> plugin_metrics() const;

  // Asks the process for its KV events in each poll from now on (the router plugin reads them,
  // ABI 1.9).
  void read_kv_events() { reads_kv_events_ = true; }
  // Appends to `out` the KV events of the process's engines polled since the last call (with
  // ALL_REMOVED first where some were lost: the process restarted, or too many came between two
  // calls). Returns true the first time the process reported keeping events: the router is to be
  // told it reports (abi.h's announcement) before these.
  bool take_kv_events(std::vector<hw_kv_event>& out);

  // A request was sent to the process.
  void sent(uint32_t prompt_tokens, uint32_t max_tokens);
  // Where a request that will continue here after its prefill on another process is counted
  // until its continuation is sent (load() adds it): polls do not see it before that.
  const std::shared_ptr<ExpectedHandoffs>& expected_handoffs() const { return expected_; }
  // A call to the process failed as if it were gone (UNAVAILABLE): down until a poll succeeds.
  // Returns whether it was up: the caller that took it down logs the transition (the poller then
  // finds it down already and logs nothing).
  bool mark_down(std::string why);

 private:
  bool fetch_model(std::chrono::milliseconds deadline);
  // Keeps the KV events of a poll's answer for take_kv_events(). Under mutex_.
  void keep_kv_events(const v1::ClusterInfoResponse& cluster);
  // Polled events kept between two routings: twice an engine process's feed (65,536), so that a
  // whole feed read at once, after an ALL_REMOVED, fits.
  static constexpr size_t kKeptKvEvents = 1 << 17;
  // A Health or ClusterInfo call failed: marks the process down, except for the first late answer
  // of a process that was up. Returns whether it still counts as up.
  bool poll_failed(std::string why, const grpc::Status& status);

  const uint32_t index_;
  const std::string pool_;
  const int32_t role_;
  const std::string address_;
  const std::string api_key_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Headway::Stub> stub_;

  mutable std::mutex mutex_;  // guards what follows
  bool up_ = false;
  bool draining_ = false;
  std::string down_reason_ = "not polled yet";
  uint32_t late_polls_ = 0;  // consecutive polls that missed their deadline
  std::optional<ModelSummary> model_;
  // The incarnation of the process that model_ was read from, once a poll saw one (0: not yet, or
  // a build without the field): another at the address was restarted there.
  uint64_t model_incarnation_ = 0;
  EngineSummary report_;
  std::vector<PluginMetricSample> plugin_metrics_;
  // Sent since the report was asked for (a request sent while a poll is in flight may or may not
  // be in its answer; counting it until the next poll errs on the side of "busier").
  uint32_t sent_requests_ = 0;
  uint64_t sent_prompt_tokens_ = 0;
  uint64_t sent_output_tokens_ = 0;
  // KV events (read_kv_events()): polled and not yet taken, bounded (ALL_REMOVED when full); the
  // number to ask from next; whether the process said it keeps them, and whether the router was
  // told so.
  std::unique_ptr<core::KvEventLog> kv_events_;
  uint64_t kv_events_next_ = 0;
  uint64_t kv_incarnation_ = 0;  // of the process whose numbers kv_events_next_ follows
  bool reports_kv_events_ = false;
  bool announced_kv_events_ = false;
  // Not under mutex_ (atomic).
  const std::shared_ptr<ExpectedHandoffs> expected_ = std::make_shared<ExpectedHandoffs>();
  std::atomic<bool> reads_kv_events_{false};
};

}  // namespace headway::serving
