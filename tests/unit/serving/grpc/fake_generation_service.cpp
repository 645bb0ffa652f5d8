#include "fake_generation_service.h"

#include <algorithm>
#include <utility>

namespace headway::serving::testing {

namespace {

// Token id n is the character n: enough to see that text travels beside the ids.
class CharDecoder final : public IncrementalDecoder {
 public:
  std::string append(std::span<const int32_t> ids) override {
    std::string text;
    for (int32_t id : ids) text.push_back(static_cast<char>(id));
    return text;
  }
  StopReason stop_reason() const override { return {}; }
  size_t ids_before_stop() const override { return 0; }
  std::string flush() override { return {}; }
  std::string token_bytes(int32_t id) const override {
    return std::string(1, static_cast<char>(id));
  }
};

uint32_t prompt_length(const GenerateInput& input) {
  switch (input.prompt_kind) {
    case GenerateInput::PromptKind::kText:
      return static_cast<uint32_t>(input.prompt_text.size());
    case GenerateInput::PromptKind::kTokenIds:
      return static_cast<uint32_t>(input.prompt_ids.size());
    case GenerateInput::PromptKind::kChat:
      return static_cast<uint32_t>(input.messages.size());
  }
  return 0;
}

}  // namespace

FakeGenerationService::FakeGenerationService() {
  health_ = {true, 1, 1};
  model_ = {"fake-model", 4096, 256, "byte"};
  cluster_ = {"fake-deployment", "single", {EngineSummary{}}};
}

void FakeGenerationService::set_script(Script script) {
  std::lock_guard lock(mutex_);
  script_ = std::move(script);
}

void FakeGenerationService::fail_next_submit(ServiceError error) {
  std::lock_guard lock(mutex_);
  submit_error_ = std::move(error);
}

void FakeGenerationService::fail_info_calls(std::optional<ServiceError> error) {
  std::lock_guard lock(mutex_);
  info_error_ = std::move(error);
}

void FakeGenerationService::set_health(HealthSummary health) {
  std::lock_guard lock(mutex_);
  health_ = health;
}

void FakeGenerationService::set_model(ModelSummary model) {
  std::lock_guard lock(mutex_);
  model_ = std::move(model);
}

void FakeGenerationService::set_cluster(ClusterSummary cluster) {
  std::lock_guard lock(mutex_);
  cluster_ = std::move(cluster);
}

void FakeGenerationService::push(const std::string& id, std::vector<int32_t> tokens) {
  std::lock_guard lock(mutex_);  // one producer at a time, as RequestStream requires
  const auto running = running_.find(id);
  if (running != running_.end()) running->second->push_tokens(tokens);
}

void FakeGenerationService::finish(const std::string& id, Finish finish, Timings timings) {
  std::lock_guard lock(mutex_);
  const auto running = running_.find(id);
  if (running == running_.end()) return;
  running->second->finish(finish, timings);
  running_.erase(running);
}

std::vector<GenerateInput> FakeGenerationService::wait_for_submitted(size_t count) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, kWaitGuard, [&] { return submitted_.size() >= count; });
  return submitted_;
}

bool FakeGenerationService::wait_for_abort(const std::string& id) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, kWaitGuard, [&] {
    return std::find(aborted_.begin(), aborted_.end(), id) != aborted_.end();
  });
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

std::shared_ptr<RequestStream> FakeGenerationService::submit(GenerateInput input) {
  std::lock_guard lock(mutex_);
  if (submit_error_) {
    ServiceError error = std::move(*submit_error_);
    submit_error_.reset();
    throw error;
  }
  std::string id =
      input.request_id.empty() ? "fake-" + std::to_string(next_id_++) : input.request_id;
  auto stream = std::make_shared<RequestStream>(id, prompt_length(input),
                                                std::make_unique<CharDecoder>(), nullptr);
  submitted_.push_back(std::move(input));
  if (script_.cached_prompt_tokens > 0) {
    stream->note_cached_prompt_tokens(script_.cached_prompt_tokens);
  }
  if (!script_.tokens.empty()) stream->push_tokens(script_.tokens);
  if (script_.finish == Finish::kNone) {
    running_[id] = stream;
  } else {
    stream->finish(script_.finish, script_.timings, script_.error, script_.kv_stage);
  }
  changed_.notify_all();
  return stream;
}

std::vector<GenerateInput> FakeGenerationService::submitted() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

bool FakeGenerationService::abort(const std::string& request_id) {
  std::lock_guard lock(mutex_);
  aborted_.push_back(request_id);
  changed_.notify_all();
  const auto running = running_.find(request_id);
  if (running == running_.end()) return false;
  running->second->finish(Finish::kAbort, {});
  running_.erase(running);
  return true;
}

bool FakeGenerationService::abort(const RequestStream& stream) {
  std::lock_guard lock(mutex_);
  aborted_.push_back(stream.id());
  changed_.notify_all();
  const auto running = running_.find(stream.id());
  if (running == running_.end() || running->second.get() != &stream) return false;
  running->second->finish(Finish::kAbort, {});
  running_.erase(running);
  return true;
}

void FakeGenerationService::free_id(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto running = running_.find(id);
  if (running == running_.end()) return;
  freed_.push_back(std::move(running->second));
  running_.erase(running);
}

void FakeGenerationService::throw_if_info_fails() const {
  if (info_error_) throw *info_error_;
}

ModelSummary FakeGenerationService::model_info() const {
  std::lock_guard lock(mutex_);
  throw_if_info_fails();
  return model_;
}

ClusterSummary FakeGenerationService::cluster_info() const {
  std::lock_guard lock(mutex_);
  throw_if_info_fails();
  return cluster_;
}

ServiceTotals FakeGenerationService::totals() const { return {}; }  // the fake counts nothing

HealthSummary FakeGenerationService::health() const {
  std::lock_guard lock(mutex_);
  throw_if_info_fails();
  return health_;
}

}  // namespace headway::serving::testing
