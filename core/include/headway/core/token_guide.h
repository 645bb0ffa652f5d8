// Guided decoding's seam in the core: what a request's output must look like (a JSON schema, a
// choice of strings), enforced token by token. The serving layer builds one guide per request
// from the request's grammar and the tokenizer's vocabulary (core/serving/guided); the engine only
// asks it which tokens may come next and tells it which one came.
//
// Ownership: SamplingParams::guide shares it; exactly one request uses a guide (it holds that
// request's place in the grammar), so copies of the params of one request only.
// Threading: used by one thread at a time (the engine thread that serves the request; the
// service builds it before submitting).
#pragma once

#include <cstdint>
#include <span>

namespace headway::core {

class TokenGuide {
 public:
  virtual ~TokenGuide() = default;

  // Sets the logit of every token that may not come next to -infinity. The end-of-sequence token
  // (and the request's stop token ids) may come only where the output is complete. Where no token
  // of the vocabulary continues the output, only the end-of-sequence token is left (the output
  // then ends where it got stuck, with finish reason "stop").
  virtual void mask(std::span<float> logits) = 0;

  // Moves past `token`, the one sampled. Returns false, and stays where it was, when the token may
  // not come here (mask() never lets one through).
  virtual bool accept(int32_t token) = 0;

  // Whether the output so far is a complete answer (the end-of-sequence token is allowed).
  virtual bool complete() const = 0;

  // Whether an end token (end-of-sequence or a stop token id) was accepted: the request ends
  // there, whatever else would keep it going.
  virtual bool ended() const = 0;
};

}  // namespace headway::core
