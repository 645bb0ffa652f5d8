// A model template: no weights; it samples deterministic token ids itself and reports each step's
// duration from a simple cost model, so the engine runs it on the virtual clock. Copy this folder,
// rename, and replace forward() with a real forward pass (then return logits or sample on your
// device, and set reports_duration = 0 so the engine measures wall time). A model that samples
// itself should draw as the core does, with headway/sdk/sampling.hpp's draw and cuts, so that a
// request gets the same tokens whichever side samples it (conformance's model.device_sampling).
// Check it with: headway-conformance --plugin build/my_model.so
#include <headway/plugin.hpp>

namespace {

constexpr hw_option_spec kOptions[] = {
    headway::sdk::double_option("seconds_per_token", 1e-5, 0.0, 1.0,
                                "Modelled cost of one token in a step."),
    // With both at 0 a step would take 0 s, which the engine refuses on the virtual clock.
    headway::sdk::double_option("seconds_per_step", 5e-3, 0.0, 10.0, "Fixed cost of a step."),
};

class MyModel final : public headway::sdk::Model {
 public:
  MyModel(const headway::sdk::Host&, const headway::sdk::Options& options, const std::string&)
      : per_token_(options.get_double("seconds_per_token")),
        per_step_(options.get_double("seconds_per_step")) {}

  hw_model_info info() const override {
    hw_model_info i{};
    i.struct_size = sizeof(hw_model_info);
    i.layers = 1;
    i.hidden = 64;
    i.heads = 1;
    i.kv_heads = 1;
    i.head_dim = 64;
    i.vocab = 32000;
    i.max_model_len = 32768;
    i.eos_token = UINT32_MAX;  // never stops by itself: outputs run to max_output_tokens
    i.kv_bytes_per_token = 256;
    i.kv_capacity_tokens = 1 << 20;
    i.needs_token_ids = 0;
    i.reports_duration = 1;
    i.returns_logits = 0;
    // With returns_logits, 1 promises a logits row for every position of a slice that sets
    // all_logits (prompt log-probabilities); the conformance suite's model.prompt_logits checks it.
    i.returns_prompt_logits = 0;
    // Without returns_logits, 1 promises the logits row of each sampling slice the host marks in
    // batch.logits_wanted (ABI 1.5), beside the sampled id; model.logits_on_request checks it.
    i.returns_logits_on_request = 0;
    return i;
  }

  void init_kv(uint32_t, uint32_t) override {}  // no memory behind the blocks

  // A real forward pass keeps each request's KV in the blocks of its slice's block_table and
  // nowhere else: with prefix caching a request may start at start > 0 on blocks another request
  // wrote (conformance's model.shared_prefix).
  void forward(const hw_model_batch& batch, hw_model_output& out) override {
    uint64_t tokens = 0;
    for (uint32_t i = 0; i < batch.slice_count; ++i) {
      const hw_model_slice& s = batch.slices[i];
      tokens += s.tokens;
      // The id depends only on the request and the output index: chunking and batching cannot
      // change it (the conformance suite checks both).
      if (s.sample)
        out.sampled[i] = static_cast<int32_t>((s.request_id * 7919 + s.output_index) % 32000);
    }
    out.seconds = per_step_ + per_token_ * static_cast<double>(tokens);
  }

 private:
  double per_token_;
  double per_step_;
};

}  // namespace

HEADWAY_EXPORT_MODEL(MyModel, "com.example.model.mine", "my_model", "0.1.0",
                     "Template model: simulated, samples its own ids", kOptions)
