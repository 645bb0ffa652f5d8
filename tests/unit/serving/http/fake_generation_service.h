// A GenerationService for the HTTP frontend's tests: deterministic output, a finish the test
// chooses, and a record of every request and abort.
//
// Output: token id k decodes to the letter 'a' + k % 26, and a request's i-th token is id i, so a
// request for n tokens reads "abcd..." (n letters) and then finishes with the configured reason.
// With a script (set_script), id k below its length decodes to the script's k-th byte instead, so
// that a request for as many tokens as the script has bytes answers with the script.
// Ids from kTextlessIds on decode to no text (a model's ids outside its tokenizer). A request that
// asks for logprobs gets, for each token, logprob -0.5 and as its top tokens itself and the ids
// after it, at -0.5, -0.75, -1.0, ... One that asks for prompt_logprobs has a prompt of ids 0 to
// kPromptTokens - 1 (immediate mode): prompt token p has logprob -1 - p / 10 and rank 2, and as its
// top tokens ids p + 1, p + 2, ... at -0.25, -0.5, ...
// In held mode, submit() only opens the stream; the test then pushes tokens and finishes it
// through push()/finish(), and can see the frontend's abort().
//
// Threading: every method is safe from any thread (the frontend calls it from its workers).
#pragma once

#include <headway/serving/generation_service.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace headway::serving::testing {

class FakeGenerationService : public GenerationService {
 public:
  static constexpr uint32_t kPromptTokens = 7;
  static constexpr uint32_t kCachedPromptTokens = 3;  // of them, "found in the prefix cache"
  static constexpr uint32_t kMaxModelLen = 4096;
  static constexpr const char* kModelName = "fake-model";
  static constexpr int32_t kTextlessIds = 1000;

  // --- what the test controls ---
  void set_finish(Finish finish, std::string error = {});  // how immediate requests end
  void set_script(std::string text);                       // what the first ids decode to
  // Where every prompt that asks (GenerateInput::reasoning_end) leaves the thinking.
  void set_prompt_reasoning(PromptReasoning where);
  void set_hold(bool hold);  // streams stay open until finish()
  // Held streams start unadmitted, as a router's do, until admit() or refuse().
  void set_admission_pending(bool pending);
  void fail_submits_with(std::optional<ServiceError> error);
  void set_cluster(ClusterSummary cluster);  // what cluster_info() says (empty by default)
  void set_serving(bool serving);
  void set_metrics(std::string text);
  // What model_info() says of prompt_logprobs (the fake pushes them whatever it says).
  void set_reports_prompt_logprobs(bool reports);

  // Held streams: push `count` more letters, or `count` ids without text (kTextlessIds, ...), or
  // finish.
  void push(const std::string& id, int count);
  void push_textless(const std::string& id, int count);
  void finish(const std::string& id, Finish finish, std::string error = {});
  void admit(const std::string& id);
  void refuse(const std::string& id, ServiceError refusal);

  // --- what the test observes ---
  std::vector<GenerateInput> submitted() const;
  std::vector<GenerateInput> tokenized() const;
  std::vector<std::string> aborted() const;
  // How often the frontend reported a request it refused itself (count_refused_request()).
  size_t refused_by_frontend() const;
  // How often it reported a missing or wrong API key (count_unauthorized_request()).
  size_t unauthorized() const;
  // Waits (up to `seconds`, generous: a liveness bound, not a timing check) for the n-th submit /
  // for an abort of `id`; returns whether it happened.
  bool wait_for_submits(size_t n, double seconds) const;
  bool wait_for_abort(const std::string& id, double seconds) const;

  // --- GenerationService ---
  std::shared_ptr<RequestStream> submit(GenerateInput input) override;
  bool abort(const std::string& request_id) override;
  ModelSummary model_info() const override;
  // Text: one id per byte (its value); token ids as given; chat: one id per message (its index).
  // Each input is kept (tokenized()).
  std::vector<int32_t> tokenize(const GenerateInput& input) const override;
  // Letters, as the streams' decoder writes them.
  std::string detokenize(const std::string& model, std::span<const int32_t> ids) const override;
  ClusterSummary cluster_info() const override;
  HealthSummary health() const override;
  ServiceTotals totals() const override;
  std::string metrics_text() const override;
  size_t drain(double timeout_seconds) override;
  void end_drain_now() override {}
  void count_refused_request() override;
  void count_unauthorized_request() override;

 private:
  struct Held {
    std::shared_ptr<RequestStream> stream;
    int32_t next_id = 0;
    int32_t logprobs = -1;  // the request's SamplingParams::logprobs
  };

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  Finish finish_ = Finish::kLength;
  std::string finish_error_;
  std::string script_;
  PromptReasoning prompt_reasoning_ = PromptReasoning::kNone;
  bool reports_prompt_logprobs_ = true;
  bool hold_ = false;
  bool admission_pending_ = false;
  std::optional<ServiceError> submit_error_;
  bool serving_ = true;
  std::string metrics_ = "# TYPE headway_requests_total counter\nheadway_requests_total 3\n";
  ClusterSummary cluster_;
  std::vector<GenerateInput> submitted_;
  mutable std::vector<GenerateInput> tokenized_;
  std::vector<std::string> aborted_;
  size_t refused_by_frontend_ = 0;
  size_t unauthorized_ = 0;
  std::map<std::string, Held> held_;
  uint64_t next_request_ = 0;
};

}  // namespace headway::serving::testing
