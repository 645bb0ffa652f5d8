#include "request_admission.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <headway/serving/echoed_input.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "bad_words.h"
#include "end_tokens.h"
#include "guided_output.h"
#include "owning_decoder.h"
#include "prompt_encoder.h"
#include "prompt_reasoning.h"
#include "request_validation.h"

namespace headway::serving {
namespace {

// Keeps the prompt's last `keep` tokens, as vLLM's truncate_prompt_tokens does (its tokenizer
// truncates on the left); a `bos` the prompt starts with stays first, within the `keep`, since a
// model fed text without it drifts.
void keep_last_tokens(std::vector<int32_t>& prompt, uint32_t keep, int32_t bos) {
  if (prompt.size() <= keep) return;
  const bool keep_bos = bos >= 0 && prompt.front() == bos && keep >= 2;
  const size_t first_kept = prompt.size() - (keep_bos ? keep - 1 : keep);
  prompt.erase(prompt.begin() + (keep_bos ? 1 : 0), prompt.begin() + static_cast<long>(first_kept));
}

}  // namespace

std::filesystem::path checkpoint_dir_of(const core::DeploymentConfig& deployment) {
  for (const hw_option_value& v : deployment.model.options->values()) {
    if (std::string_view(v.key.data, v.key.size) != "path" || v.type != HW_OPTION_STRING) continue;
    std::filesystem::path dir(std::string(v.string_value.data, v.string_value.size));
    if (dir.empty()) return {};
    if (dir.is_relative() && deployment.file.has_parent_path()) {
      dir = deployment.file.parent_path() / dir;
    }
    return dir.lexically_normal();
  }
  return {};
}

std::filesystem::path tokenizer_dir_of(const core::DeploymentConfig& deployment) {
  return deployment.tokenizer.empty() ? checkpoint_dir_of(deployment) : deployment.tokenizer;
}

std::string default_model_name(const core::DeploymentConfig& deployment) {
  if (!deployment.server.served_model_name.empty()) return deployment.server.served_model_name;
  std::filesystem::path dir = checkpoint_dir_of(deployment);
  if (dir.empty()) return deployment.name;
  // "models/tiny/" names "tiny" as "models/tiny" does, and "." the directory it is (a walkthrough
  // found a trailing slash served the model as "").
  if (!dir.has_filename() || dir.filename() == "." || dir.filename() == "..") {
    std::error_code ignored;
    const std::filesystem::path absolute = std::filesystem::absolute(dir, ignored);
    dir = absolute.lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();
  }
  return dir.filename().empty() ? deployment.name : dir.filename().string();
}

std::optional<uint32_t> checkpoint_vocab_size(const core::DeploymentConfig& deployment) {
  for (const hw_option_value& v : deployment.model.options->values()) {
    if (std::string_view(v.key.data, v.key.size) == "shape" && v.type == HW_OPTION_ENUM &&
        std::string_view(v.string_value.data, v.string_value.size) != "config") {
      return std::nullopt;
    }
  }
  const std::filesystem::path dir = checkpoint_dir_of(deployment);
  std::error_code ignored;
  if (dir.empty() || !std::filesystem::is_regular_file(dir / "config.json", ignored)) {
    return std::nullopt;
  }
  const nlohmann::json config = core::read_json_file(dir / "config.json");
  const auto field = config.is_object() ? config.find("vocab_size") : config.end();
  if (field == config.end() || !field->is_number()) return std::nullopt;
  // 300.0 is 300, as the model plugins read it (llama_config.cpp, hf_config.cpp).
  const double value = field->get<double>();
  if (!(value >= 1 && value <= UINT32_MAX) || value != std::floor(value)) return std::nullopt;
  return static_cast<uint32_t>(value);
}

RequestAdmission::RequestAdmission(const core::DeploymentConfig& deployment, ModelSummary served)
    : model_(std::move(served)) {
  const std::filesystem::path dir = tokenizer_dir_of(deployment);
  const uint32_t vocab = model_.vocab;
  if (!dir.empty()) {
    std::error_code ignored;
    if (deployment.tokenizer.empty() && std::filesystem::is_regular_file(dir, ignored)) {
      throw core::Error(fmt::format(
          "{}: model.options.path names a file ({}), where serve reads the tokenizer from a "
          "directory: set [model] tokenizer to the directory holding the model's tokenizer.json "
          "(and tokenizer_config.json)",
          deployment.file.string(), dir.string()));
    }
    try {
      tokenizer_ = core::Tokenizer::load(dir);
    } catch (const core::Error& e) {
      if (deployment.tokenizer.empty()) throw;
      throw core::Error(fmt::format("{}: model.tokenizer: {}", deployment.file.string(), e.what()));
    }
    if (tokenizer_->vocab_size() > vocab) {
      throw core::Error(
          fmt::format("{}: the tokenizer of {} has {} tokens, more than the model's "
                      "vocabulary of {}",
                      deployment.file.string(), dir.string(), tokenizer_->vocab_size(), vocab));
    }
  }
  end_tokens_ = checkpoint_end_tokens(dir, tokenizer_ ? tokenizer_->eos() : -1, vocab);
  encoder_ = std::make_unique<PromptEncoder>(tokenizer_, dir);
  if (model_.name.empty()) model_.name = default_model_name(deployment);
  model_.tokenizer = tokenizer_ ? std::string(tokenizer_->kind()) : std::string("none");
}

RequestAdmission::~RequestAdmission() = default;

void RequestAdmission::check_model(const std::string& requested) const {
  if (!requested.empty() && requested != model_.name) {
    throw ServiceError(ErrorCode::kNotFound,
                       fmt::format("model {} is not served here (this server serves \"{}\")",
                                   quote_input(requested), model_.name),
                       "model");
  }
}

std::vector<int32_t> RequestAdmission::prompt_of(const GenerateInput& input) const {
  std::vector<int32_t> prompt = encoder_->encode(input);
  if (input.truncate_prompt_tokens) {
    keep_last_tokens(prompt, truncation_length(*input.truncate_prompt_tokens, model_.max_model_len),
                     tokenizer_ ? tokenizer_->bos() : -1);
  }
  validate_token_ids(prompt, model_.vocab, "prompt");
  return prompt;
}

std::vector<int32_t> RequestAdmission::tokenize(const GenerateInput& input) const {
  check_model(input.model);
  validate_prompt_form(input);
  return prompt_of(input);
}

std::string RequestAdmission::detokenize(const std::string& model,
                                         std::span<const int32_t> ids) const {
  check_model(model);
  if (tokenizer_ == nullptr) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       "detokenizing needs a tokenizer, and this model has none", "tokens");
  }
  validate_token_ids(ids, model_.vocab, "tokens");
  return tokenizer_->decode(ids);
}

AdmittedRequest RequestAdmission::admit(GenerateInput& input) const {
  check_model(input.model);
  validate_request_id(input.request_id);
  validate_prompt_form(input);
  if (!input.bad_words.empty()) {
    if (tokenizer_ == nullptr) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         "bad_words need a tokenizer, and this model has none", "bad_words");
    }
    for (auto& ids : bad_words_token_ids(*tokenizer_, input.bad_words)) {
      input.sampling.bad_words_ids.push_back(std::move(ids));
    }
    input.bad_words.clear();  // encoded once, even if the request is admitted again
  }
  validate_sampling(input, model_.vocab);
  validate_logits_processing(input.sampling, model_);
  // The checkpoint's end tokens stop the request too, unless it ignores EOS; they do not count
  // against the client's limit.
  std::span<const int32_t> end_tokens;
  if (!input.sampling.ignore_eos) {
    end_tokens = end_tokens_;
    std::vector<int32_t>& stop_ids = input.sampling.stop_token_ids;
    stop_ids.insert(stop_ids.end(), end_tokens_.begin(), end_tokens_.end());
  }
  dedupe_stop_token_ids(input.sampling.stop_token_ids, end_tokens);
  AdmittedRequest admitted;
  if (!input.request_class.empty()) {
    validate_request_class(input.request_class);
    admitted.request_class = input.request_class;
  } else {
    admitted.request_class =
        input.prompt_kind == GenerateInput::PromptKind::kChat ? "chat" : "completion";
  }
  if (!input.stop.empty() && tokenizer_ == nullptr) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       "stop strings need a tokenizer, and this model has none", "stop");
  }
  admitted.prompt = prompt_of(input);
  if (input.max_tokens_to_context_end && admitted.prompt.size() < model_.max_model_len) {
    input.max_tokens = model_.max_model_len - static_cast<uint32_t>(admitted.prompt.size());
  }
  validate_length(static_cast<uint32_t>(std::min<size_t>(admitted.prompt.size(), UINT32_MAX)),
                  input.max_tokens, model_.max_model_len,
                  input.prompt_kind == GenerateInput::PromptKind::kChat ? "messages" : "prompt",
                  input.max_tokens_field);
  validate_min_tokens(input.sampling.min_tokens, input.max_tokens, input.max_tokens_field);
  if (!input.reasoning_end.empty() && tokenizer_ != nullptr) {
    admitted.prompt_reasoning = prompt_reasoning_of(admitted.prompt, input.reasoning_end);
  }
  attach_guide(input, admitted);
  return admitted;
}

PromptReasoning RequestAdmission::prompt_reasoning_of(std::span<const int32_t> prompt,
                                                      std::string_view marker) const {
  std::call_once(turn_markers_found_, [&] {
    turn_markers_ = std::make_unique<const TurnMarkers>(*tokenizer_, encoder_->generation_prompt());
  });
  return prompt_reasoning(*tokenizer_, *turn_markers_, prompt, marker);
}

void RequestAdmission::attach_guide(GenerateInput& input, const AdmittedRequest& admitted) const {
  const std::span<const int32_t> prompt = admitted.prompt;
  input.sampling.guide = nullptr;
  if (input.guided.kind == GuidedOutput::Kind::kNone) return;
  const std::string field = guided::field_of(input.guided);
  const auto refuse = [](const std::string& message, const std::string& param) {
    throw ServiceError(ErrorCode::kInvalidArgument, message, param);
  };
  if (tokenizer_ == nullptr) {
    refuse(field +
               " needs the model's tokenizer (guided output is checked byte by byte), and "
               "this model has none",
           field);
  }
  if (!model_.samples_on_host) {
    refuse(field +
               " is not supported by this deployment: its model samples on its device, and "
               "only models that return logits to the host can be guided",
           field);
  }
  if (input.sampling.ignore_eos) {
    refuse("ignore_eos cannot be combined with " + field +
               ": the output ends where the guided answer is complete",
           "ignore_eos");
  }
  if (input.sampling.min_tokens > 0) {
    refuse("min_tokens cannot be combined with " + field +
               ": the output ends where the guided answer is complete, however short",
           "min_tokens");
  }
  if (!input.sampling.allowed_token_ids.empty()) {
    refuse("allowed_token_ids cannot be combined with " + field +
               ": the two may have no token in common, which would leave nothing to choose",
           "allowed_token_ids");
  }
  if (!input.sampling.bad_words_ids.empty()) {
    refuse("bad_words cannot be combined with " + field +
               ": a banned token may be the only one the answer's shape allows next",
           "bad_words");
  }
  if (!input.guided.starts_after.empty()) {
    // Read once: the answer's parser asked for the same marker (and the guide and the parser then
    // agree by construction).
    const PromptReasoning where = input.guided.starts_after == input.reasoning_end
                                      ? admitted.prompt_reasoning
                                      : prompt_reasoning_of(prompt, input.guided.starts_after);
    switch (where) {
      case PromptReasoning::kEnded:  // no reasoning comes: the shape applies from the start
        input.guided.starts_after.clear();
        input.guided.reasoning_opener.clear();
        break;
      case PromptReasoning::kOpen:  // the model thinks from its first token, no tag first
        input.guided.reasoning_opener.clear();
        break;
      case PromptReasoning::kNone:
        break;
    }
  }
  std::call_once(guides_built_, [&] {
    guides_ = std::make_unique<guided::GuideFactory>(
        std::make_shared<const guided::VocabularyIndex>(*tokenizer_));
  });
  std::shared_ptr<core::TokenGuide> guide =
      guides_->make(input.guided, input.sampling.stop_token_ids);
  // A continued request (disaggregation) resumes where its generated tokens left the output.
  for (size_t i = 0; i < input.generated_ids.size(); ++i) {
    if (!guide->accept(input.generated_ids[i])) {
      refuse(fmt::format("generated_ids[{}]: token {} does not continue the guided output", i,
                         input.generated_ids[i]),
             fmt::format("generated_ids[{}]", i));
    }
  }
  input.sampling.guide = std::move(guide);
}

std::unique_ptr<IncrementalDecoder> RequestAdmission::decoder(GenerateInput& input,
                                                              std::span<const int32_t> prompt,
                                                              uint32_t min_tokens) const {
  DecodeOptions options;
  // The ids before the first output: more than the decoder keeps (5, more after ids without text).
  constexpr size_t kContext = 16;
  const std::vector<int32_t>& generated = input.generated_ids;
  const size_t from_generated = std::min(generated.size(), kContext);
  const size_t from_prompt = std::min(prompt.size(), kContext - from_generated);
  options.context.assign(prompt.end() - static_cast<ptrdiff_t>(from_prompt), prompt.end());
  options.context.insert(options.context.end(),
                         generated.end() - static_cast<ptrdiff_t>(from_generated), generated.end());
  options.stop_strings = std::move(input.stop);
  options.stop_token_ids = input.sampling.stop_token_ids;
  options.keep_stop_string = input.include_stop_str_in_output;
  options.min_tokens = min_tokens;
  options.skip_special_tokens = input.skip_special_tokens;
  if (tokenizer_ != nullptr && !input.sampling.ignore_eos) {
    options.end_of_sequence = tokenizer_->eos();
  }
  if (tokenizer_ == nullptr) return make_token_id_decoder(std::move(options));
  return make_decoder(tokenizer_, std::move(options));
}

}  // namespace headway::serving
