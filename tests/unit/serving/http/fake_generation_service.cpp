#include "fake_generation_service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>

namespace headway::serving::testing {
namespace {

// The fake's tokenizer: a text prompt's bytes, token ids as given, a message's index per message.
std::vector<int32_t> fake_prompt_ids(const GenerateInput& input) {
  switch (input.prompt_kind) {
    case GenerateInput::PromptKind::kText:
      return std::vector<int32_t>(input.prompt_text.begin(), input.prompt_text.end());
    case GenerateInput::PromptKind::kTokenIds:
      return input.prompt_ids;
    default: {
      std::vector<int32_t> ids(input.messages.size());
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
      return ids;
    }
  }
}

// Letters, with none held back: the frontend's tests do not exercise stop strings (the service's
// job), only that they are passed through. A stop token id is noted, for the stop_reason field.
class LetterDecoder : public IncrementalDecoder {
 public:
  LetterDecoder(std::vector<int32_t> stop_token_ids, std::string script)
      : stop_token_ids_(std::move(stop_token_ids)), script_(std::move(script)) {}
  std::string append(std::span<const int32_t> ids) override {
    std::string text;
    for (int32_t id : ids) {
      if (std::find(stop_token_ids_.begin(), stop_token_ids_.end(), id) != stop_token_ids_.end()) {
        stop_token_ = id;
      } else {
        text += token_bytes(id);
      }
    }
    return text;
  }
  StopReason stop_reason() const override {
    return stop_token_ ? StopReason(*stop_token_) : StopReason();
  }
  size_t ids_before_stop() const override { return 0; }  // no stop strings here
  std::string flush() override { return {}; }
  std::string token_bytes(int32_t id) const override {
    if (id >= FakeGenerationService::kTextlessIds) return {};
    if (static_cast<size_t>(id) < script_.size()) return std::string(1, script_[id]);
    return std::string(1, static_cast<char>('a' + id % 26));
  }

 private:
  std::vector<int32_t> stop_token_ids_;
  std::string script_;
  std::optional<int32_t> stop_token_;
};

std::vector<int32_t> ids_from(int32_t first, int count) {
  std::vector<int32_t> ids;
  for (int i = 0; i < count; ++i) ids.push_back(first + i);
  return ids;
}

// Pushes `ids`, with the made-up logprobs the header describes when `logprobs` >= 0.
void push_ids(RequestStream& stream, const std::vector<int32_t>& ids, int32_t logprobs) {
  if (logprobs < 0) {
    stream.push_tokens(ids);
    return;
  }
  std::vector<std::vector<core::TokenLogprob>> tops;
  std::vector<core::SampledLogprobs> entries;
  for (const int32_t id : ids) {
    tops.emplace_back();
    for (int32_t k = 0; k < logprobs; ++k) tops.back().push_back({id + k, -0.5f - 0.25f * k});
  }
  for (const auto& top : tops) entries.push_back(core::SampledLogprobs{-0.5f, top});
  stream.push_tokens(ids, entries);
}

// Pushes the made-up prompt figures the header describes.
void push_prompt_figures(RequestStream& stream, int32_t top_count) {
  stream.expect_prompt_logprobs(0);
  std::vector<std::vector<core::TokenLogprob>> tops;
  for (uint32_t p = 1; p < FakeGenerationService::kPromptTokens; ++p) {
    tops.emplace_back();
    for (int32_t k = 0; k < top_count; ++k) {
      tops.back().push_back({static_cast<int32_t>(p) + 1 + k, -0.25f - 0.25f * k});
    }
  }
  std::vector<core::PromptTokenLogprobs> figures;
  for (uint32_t p = 1; p < FakeGenerationService::kPromptTokens; ++p) {
    figures.push_back(
        {p, static_cast<int32_t>(p), -1.0f - 0.1f * static_cast<float>(p), 2, tops[p - 1]});
  }
  stream.push_prompt_logprobs(figures);
}

}  // namespace

void FakeGenerationService::set_finish(Finish finish, std::string error) {
  std::lock_guard lock(mutex_);
  finish_ = finish;
  finish_error_ = std::move(error);
}

void FakeGenerationService::set_script(std::string text) {
  std::lock_guard lock(mutex_);
  script_ = std::move(text);
}

void FakeGenerationService::set_prompt_reasoning(PromptReasoning where) {
  std::lock_guard lock(mutex_);
  prompt_reasoning_ = where;
}

void FakeGenerationService::set_hold(bool hold) {
  std::lock_guard lock(mutex_);
  hold_ = hold;
}

void FakeGenerationService::set_admission_pending(bool pending) {
  std::lock_guard lock(mutex_);
  admission_pending_ = pending;
}

void FakeGenerationService::fail_submits_with(std::optional<ServiceError> error) {
  std::lock_guard lock(mutex_);
  submit_error_ = std::move(error);
}

void FakeGenerationService::set_serving(bool serving) {
  std::lock_guard lock(mutex_);
  serving_ = serving;
}

void FakeGenerationService::set_metrics(std::string text) {
  std::lock_guard lock(mutex_);
  metrics_ = std::move(text);
}

void FakeGenerationService::set_cluster(ClusterSummary cluster) {
  std::lock_guard lock(mutex_);
  cluster_ = std::move(cluster);
}

void FakeGenerationService::push(const std::string& id, int count) {
  std::lock_guard lock(mutex_);
  auto it = held_.find(id);
  if (it == held_.end()) return;
  push_ids(*it->second.stream, ids_from(it->second.next_id, count), it->second.logprobs);
  it->second.next_id += count;
}

void FakeGenerationService::push_textless(const std::string& id, int count) {
  std::lock_guard lock(mutex_);
  auto it = held_.find(id);
  if (it == held_.end()) return;
  push_ids(*it->second.stream, ids_from(kTextlessIds, count), it->second.logprobs);
}

void FakeGenerationService::finish(const std::string& id, Finish finish, std::string error) {
  std::lock_guard lock(mutex_);
  auto it = held_.find(id);
  if (it == held_.end()) return;
  it->second.stream->finish(finish, Timings{}, std::move(error));
  held_.erase(it);
}

void FakeGenerationService::admit(const std::string& id) {
  std::lock_guard lock(mutex_);
  if (auto it = held_.find(id); it != held_.end()) it->second.stream->admit();
}

void FakeGenerationService::refuse(const std::string& id, ServiceError refusal) {
  std::lock_guard lock(mutex_);
  auto it = held_.find(id);
  if (it == held_.end()) return;
  it->second.stream->refuse(std::move(refusal), Timings{});
  held_.erase(it);
}

std::vector<GenerateInput> FakeGenerationService::submitted() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

std::vector<GenerateInput> FakeGenerationService::tokenized() const {
  std::lock_guard lock(mutex_);
  return tokenized_;
}

std::vector<int32_t> FakeGenerationService::tokenize(const GenerateInput& input) const {
  std::lock_guard lock(mutex_);
  tokenized_.push_back(input);
  return fake_prompt_ids(input);
}

std::string FakeGenerationService::detokenize(const std::string& /*model*/,
                                              std::span<const int32_t> ids) const {
  std::lock_guard lock(mutex_);
  return LetterDecoder({}, script_).append(ids);
}

std::vector<std::string> FakeGenerationService::aborted() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

size_t FakeGenerationService::refused_by_frontend() const {
  std::lock_guard lock(mutex_);
  return refused_by_frontend_;
}

void FakeGenerationService::count_refused_request() {
  std::lock_guard lock(mutex_);
  ++refused_by_frontend_;
}

size_t FakeGenerationService::unauthorized() const {
  std::lock_guard lock(mutex_);
  return unauthorized_;
}

void FakeGenerationService::count_unauthorized_request() {
  std::lock_guard lock(mutex_);
  ++unauthorized_;
}

bool FakeGenerationService::wait_for_submits(size_t n, double seconds) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, std::chrono::duration<double>(seconds),
                           [&] { return submitted_.size() >= n; });
}

bool FakeGenerationService::wait_for_abort(const std::string& id, double seconds) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
    for (const auto& aborted : aborted_) {
      if (aborted == id) return true;
    }
    return false;
  });
}

std::shared_ptr<RequestStream> FakeGenerationService::submit(GenerateInput input) {
  std::lock_guard lock(mutex_);
  if (submit_error_) throw *submit_error_;
  if (!input.model.empty() && input.model != kModelName) {
    throw ServiceError(ErrorCode::kNotFound, "model \"" + input.model + "\" is not served",
                       "model");
  }
  std::string id =
      input.request_id.empty() ? "fake-" + std::to_string(next_request_++) : input.request_id;
  const uint32_t max_tokens = input.max_tokens;
  const int32_t logprobs = input.sampling.logprobs;
  const int32_t prompt_logprobs = input.sampling.prompt_logprobs;
  std::vector<int32_t> stop_token_ids = input.sampling.stop_token_ids;
  std::vector<int32_t> prompt_ids =
      input.return_prompt_ids ? fake_prompt_ids(input) : std::vector<int32_t>();
  submitted_.push_back(std::move(input));
  changed_.notify_all();

  auto stream = std::make_shared<RequestStream>(
      id, kPromptTokens, std::make_unique<LetterDecoder>(std::move(stop_token_ids), script_),
      nullptr, !(hold_ && admission_pending_));
  stream->note_cached_prompt_tokens(kCachedPromptTokens);
  stream->set_prompt_ids(std::move(prompt_ids));
  if (!submitted_.back().reasoning_end.empty()) stream->set_prompt_reasoning(prompt_reasoning_);
  if (hold_) {
    held_[id] = Held{stream, 0, logprobs};
    return stream;
  }
  // Immediate mode: the whole answer is there before the frontend first looks.
  const int count = finish_ == Finish::kLength ? static_cast<int>(max_tokens)
                                               : static_cast<int>(max_tokens > 3 ? 3 : max_tokens);
  if (prompt_logprobs >= 0) push_prompt_figures(*stream, prompt_logprobs);
  push_ids(*stream, ids_from(0, count), logprobs);
  stream->finish(finish_, Timings{}, finish_error_);
  return stream;
}

bool FakeGenerationService::abort(const std::string& request_id) {
  std::lock_guard lock(mutex_);
  aborted_.push_back(request_id);
  changed_.notify_all();
  auto it = held_.find(request_id);
  if (it == held_.end()) return false;
  it->second.stream->finish(Finish::kAbort, Timings{});
  held_.erase(it);
  return true;
}

ModelSummary FakeGenerationService::model_info() const {
  std::lock_guard lock(mutex_);
  ModelSummary model{kModelName, kMaxModelLen, 256, "byte"};
  model.reports_prompt_logprobs = reports_prompt_logprobs_;
  return model;
}

void FakeGenerationService::set_reports_prompt_logprobs(bool reports) {
  std::lock_guard lock(mutex_);
  reports_prompt_logprobs_ = reports;
}

ClusterSummary FakeGenerationService::cluster_info() const {
  std::lock_guard lock(mutex_);
  return cluster_;
}

ServiceTotals FakeGenerationService::totals() const { return {}; }  // the fake counts nothing

HealthSummary FakeGenerationService::health() const {
  std::lock_guard lock(mutex_);
  return summarize_health(true, {EngineHealth{HW_ENGINE_ROLE_MIXED, serving_}});
}

std::string FakeGenerationService::metrics_text() const {
  std::lock_guard lock(mutex_);
  return metrics_;
}

size_t FakeGenerationService::drain(double) { return 0; }

}  // namespace headway::serving::testing
