// A GenerationService for the gRPC frontend's tests: it records what it is given and produces what
// the test scripts, with no model and no tokenizer. Token id n decodes to the character n, so
// {72, 105} reads "Hi".
//
// Ownership: streams are shared with the frontend; the fake keeps the running ones until they
// finish or are aborted. Threading: every method is safe from any thread (one mutex); the waits
// block the calling test thread.
#pragma once

#include <headway/serving/generation_service.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace headway::serving::testing {

// How long a test waits for something the frontend must do before it fails (a guard against a
// hang, never a measurement).
inline constexpr std::chrono::seconds kWaitGuard{30};

class FakeGenerationService final : public GenerationService {
 public:
  // What submit() does with the next requests.
  struct Script {
    std::vector<int32_t> tokens;      // pushed at once when the request is submitted
    Finish finish = Finish::kLength;  // kNone: the request keeps running until the test
                                      // finishes it or it is aborted
    Timings timings;
    std::string error;                  // with Finish::kError
    uint32_t cached_prompt_tokens = 0;  // noted before the tokens are pushed
    std::optional<KvStage> kv_stage;    // with Finish::kHandoff: where the KV is said to wait
  };

  FakeGenerationService();

  void set_script(Script script);
  // The next submit() throws `error` (once).
  void fail_next_submit(ServiceError error);
  // model_info(), cluster_info() and health() throw `error` while it is set.
  void fail_info_calls(std::optional<ServiceError> error);
  void set_health(HealthSummary health);
  void set_model(ModelSummary model);
  void set_cluster(ClusterSummary cluster);

  // --- the test drives a running request (Script::finish == kNone) ---
  void push(const std::string& id, std::vector<int32_t> tokens);
  void finish(const std::string& id, Finish finish, Timings timings = {});
  // Frees `id` for a new request while its request runs on unfinished, as a real service's abort
  // does until the engine lets go: push() and finish() then reach the next request under it.
  void free_id(const std::string& id);

  // Waits until `count` requests have been submitted; returns their inputs (all of them).
  std::vector<GenerateInput> wait_for_submitted(size_t count);
  // The inputs submitted so far, without waiting.
  std::vector<GenerateInput> submitted() const;
  // True once abort(id) has been called, waiting up to kWaitGuard.
  bool wait_for_abort(const std::string& id);
  std::vector<std::string> aborted() const;
  // How often the frontend reported a request it refused itself (count_refused_request()).
  size_t refused_by_frontend() const;
  // How often it reported a missing or wrong API key (count_unauthorized_request()).
  size_t unauthorized() const;

  // --- GenerationService ---
  std::shared_ptr<RequestStream> submit(GenerateInput input) override;
  bool abort(const std::string& request_id) override;
  // Ends `stream` if it is the running request under its id; recorded in aborted() by id.
  bool abort(const RequestStream& stream) override;
  ModelSummary model_info() const override;
  ClusterSummary cluster_info() const override;
  HealthSummary health() const override;
  ServiceTotals totals() const override;
  std::string metrics_text() const override { return {}; }
  size_t drain(double) override { return 0; }
  void end_drain_now() override {}
  void count_refused_request() override;
  void count_unauthorized_request() override;

 private:
  void throw_if_info_fails() const;  // mutex_ held

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  Script script_;
  std::optional<ServiceError> submit_error_;
  std::optional<ServiceError> info_error_;
  HealthSummary health_;
  ModelSummary model_;
  ClusterSummary cluster_;
  std::vector<GenerateInput> submitted_;
  std::vector<std::string> aborted_;
  std::map<std::string, std::shared_ptr<RequestStream>> running_;
  std::vector<std::shared_ptr<RequestStream>> freed_;  // free_id()'s: kept, as a service would
  uint64_t next_id_ = 1;
  size_t refused_by_frontend_ = 0;
  size_t unauthorized_ = 0;
};

}  // namespace headway::serving::testing
