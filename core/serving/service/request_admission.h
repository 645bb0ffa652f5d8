// What every request must pass before any engine sees it, and the text side of the served model:
// the checkpoint's tokenizer and chat template, the limits clients are checked against, and the
// decoder a request's stream runs. Shared by the in-process service and the router process, so
// that a request is refused for the same reasons, with the same messages, whichever serves it.
//
// Ownership: owns the model summary and the encoder; shares the tokenizer with every decoder it
// hands out. Threading: immutable after construction; admit() and decoder() are safe to call
// from any thread, concurrently.
#pragma once

#include <headway/core/deployment_config.h>
#include <headway/core/tokenizer.h>
#include <headway/serving/generation_service.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving {

class PromptEncoder;
class TurnMarkers;
namespace guided {
class GuideFactory;
}

// The checkpoint directory the deployment's model reads (its `path` option), resolved like the
// model plugin does: relative to the deployment file. Empty when the model has none.
std::filesystem::path checkpoint_dir_of(const core::DeploymentConfig& deployment);

// Where the tokenizer, the chat template and the end tokens are read: [model] tokenizer when the
// file sets it, else the checkpoint directory. Empty when neither is given.
std::filesystem::path tokenizer_dir_of(const core::DeploymentConfig& deployment);

// The model's name as clients give it when no service option names it: [server]
// served_model_name, else the checkpoint directory's name, or the deployment's name when the model
// reads no checkpoint.
std::string default_model_name(const core::DeploymentConfig& deployment);

// The `vocab_size` of the config.json of the deployment's checkpoint; nullopt without a checkpoint,
// a config.json or an integer vocab_size in it, and when the model builds a named shape instead
// (an enum option `shape` other than "config", as the cuda model's with random weights: its path
// may be there for the tokenizer alone). A router process checks its engine processes against it.
std::optional<uint32_t> checkpoint_vocab_size(const core::DeploymentConfig& deployment);

// A request that passed admission: its prompt as token ids and its class (for metrics).
struct AdmittedRequest {
  std::vector<int32_t> prompt;
  std::string request_class;
  // For a request with GenerateInput::reasoning_end: where its prompt left the thinking.
  PromptReasoning prompt_reasoning = PromptReasoning::kNone;
};

class RequestAdmission {
 public:
  // Loads the tokenizer and chat template of the deployment's checkpoint (none when the model has
  // no `path`: only token-id prompts are then served). `served.name` empty: the checkpoint
  // directory's name, else the deployment's. `served`: what every engine's model allows
  // (vocab, max_model_len, samples_on_host, reads_token_ids) and the name to serve it under;
  // model() adds the tokenizer and the default name. Throws core::Error naming the deployment
  // file when the tokenizer has more tokens than `served.vocab`.
  RequestAdmission(const core::DeploymentConfig& deployment, ModelSummary served);
  ~RequestAdmission();
  RequestAdmission(const RequestAdmission&) = delete;
  RequestAdmission& operator=(const RequestAdmission&) = delete;

  const ModelSummary& model() const { return model_; }

  // Checks the model name, the prompt form, sampling values, the class label, token ids and the
  // context length; encodes the prompt; resolves max_tokens_to_context_end into input.max_tokens;
  // adds the checkpoint's end tokens to input.sampling.stop_token_ids (unless ignore_eos);
  // compiles input.guided into input.sampling.guide (moved past input.generated_ids).
  // Throws ServiceError (the message says what is wrong, param names the field).
  AdmittedRequest admit(GenerateInput& input) const;

  // The model name and prompt checks of admit() and the prompt it would encode (truncation
  // included), without the length checks (GenerationService::tokenize).
  std::vector<int32_t> tokenize(const GenerateInput& input) const;
  // GenerationService::detokenize.
  std::string detokenize(const std::string& model, std::span<const int32_t> ids) const;

  // The decoder of `input`'s stream: its stop strings (moved out of input.stop), stop token ids
  // and detokenization fields, and the tokenizer's end-of-sequence token (no stop_reason); no stop
  // counts in the first `min_tokens` outputs the stream carries. Without a tokenizer, one that
  // gives no text but still reports the stop token id that ended a request.
  // `prompt`: the admitted prompt's ids, whose last few (with any generated ids `input` brings)
  // the decoder reads first (DecodeOptions::context).
  std::unique_ptr<IncrementalDecoder> decoder(GenerateInput& input, std::span<const int32_t> prompt,
                                              uint32_t min_tokens) const;

 private:
  void check_model(const std::string& requested) const;
  // Encodes the prompt and applies truncate_prompt_tokens.
  std::vector<int32_t> prompt_of(const GenerateInput& input) const;
  // Guided output: checks what it cannot go with and sets input.sampling.guide; `admitted`: the
  // encoded prompt (does it already end the reasoning? GuidedOutput::starts_after) and where it
  // left the thinking when the request asked (reasoning_end).
  void attach_guide(GenerateInput& input, const AdmittedRequest& admitted) const;
  // Where `prompt` left the thinking that `marker` closes (needs the tokenizer).
  PromptReasoning prompt_reasoning_of(std::span<const int32_t> prompt,
                                      std::string_view marker) const;

  std::shared_ptr<const core::Tokenizer> tokenizer_;
  // The checkpoint's end tokens (end_tokens.h), added to every request's stop_token_ids unless it
  // ignores EOS.
  std::vector<int32_t> end_tokens_;
  std::unique_ptr<PromptEncoder> encoder_;
  ModelSummary model_;
  // Guided decoding's vocabulary and grammars, built at the first guided request.
  mutable std::once_flag guides_built_;
  mutable std::unique_ptr<guided::GuideFactory> guides_;
  // The tokens that may start a chat template's turn (prompt_reasoning.h), found at the first
  // request that asks where its prompt left the thinking.
  mutable std::once_flag turn_markers_found_;
  mutable std::unique_ptr<const TurnMarkers> turn_markers_;
};

}  // namespace headway::serving
