// Writing a model as a C++ class. Header-only; plugin side.
// Lifetimes: the Host may be kept, by reference or by copy (it lives as long as the instance); the
// Options are valid only during the constructor: read every option there.
// Threading: one thread at a time calls an instance, not always the same one (serve creates it on
// the loading thread and calls forward() on the engine's; abi.h); forward() may fan out to its
// own threads.
#pragma once

#include <headway/abi.h>

#include <cstddef>
#include <headway/sdk/host.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <string>

namespace headway::sdk {

class Model {
 public:
  virtual ~Model() = default;
  virtual hw_model_info info() const = 0;
  virtual void init_kv(uint32_t block_count, uint32_t block_size) = 0;
  // Default: no addressable KV memory (simulated models).
  virtual hw_memory_desc kv_memory() const {
    return hw_memory_desc{nullptr, 0, HW_MEMORY_NONE, -1, 0, 0};
  }
  virtual void forward(const hw_model_batch& batch, hw_model_output& output) = 0;
};

// hw_model_batch.logits_wanted (ABI 1.5): NULL where the batch predates the field or marks nothing.
inline const uint8_t* logits_wanted(const hw_model_batch& batch) {
  constexpr size_t kEnd = offsetof(hw_model_batch, logits_wanted) + sizeof(batch.logits_wanted);
  return batch.struct_size >= kEnd ? batch.logits_wanted : nullptr;
}

// Whether the host wants the sampled row of slice i: always from a model that returns logits,
// where logits_wanted marks it from one that returns them on request (ABI 1.5), else never.
inline bool sample_row_wanted(const hw_model_batch& batch, uint32_t i, const hw_model_info& info) {
  if (info.returns_logits != 0) return true;
  const uint8_t* wanted = logits_wanted(batch);
  return info.returns_logits_on_request != 0 && wanted != nullptr && wanted[i] != 0;
}

// The logits rows forward() writes for `slice` (hw_model_output): one per position when it asks
// for all of them (ABI 1.4), else one when it samples and its row is wanted (above; always, the
// default, for a model that returns logits), else none.
constexpr uint32_t logits_rows(const hw_model_slice& slice, bool sample_row_wanted = true) {
  if (slice.all_logits != 0) return slice.tokens;
  return slice.sample != 0 && sample_row_wanted ? 1u : 0u;
}

// T is constructible from (const Host&, const Options&, const std::string& config_dir).
template <class T>
struct ModelAdapter {
  static constexpr int32_t kind = HW_KIND_MODEL;
  static Model* self(hw_model* m) { return &reinterpret_cast<WithHost<T>*>(m)->object; }

  static int32_t create(const hw_host_services* host, const hw_options* options, hw_str config_dir,
                        hw_model** out, hw_status* status) {
    return guarded(status, [&] {
      *out = reinterpret_cast<hw_model*>(
          new WithHost<T>(host, Options(options), std::string(view(config_dir))));
    });
  }
  static void destroy(hw_model* m) { delete reinterpret_cast<WithHost<T>*>(m); }
  static int32_t get_info(hw_model* m, hw_model_info* info, hw_status* status) {
    return guarded(status, [&] {
      *info = self(m)->info();
      info->struct_size = sizeof(hw_model_info);
    });
  }
  static int32_t init_kv(hw_model* m, uint32_t blocks, uint32_t block_size, hw_status* status) {
    return guarded(status, [&] { self(m)->init_kv(blocks, block_size); });
  }
  static int32_t kv_memory(hw_model* m, hw_memory_desc* memory, hw_status* status) {
    return guarded(status, [&] { *memory = self(m)->kv_memory(); });
  }
  static int32_t forward(hw_model* m, const hw_model_batch* batch, hw_model_output* output,
                         hw_status* status) {
    return guarded(status, [&] { self(m)->forward(*batch, *output); });
  }
  static constexpr hw_model_table table = {
      sizeof(hw_model_table), &create, &destroy, &get_info, &init_kv, &kv_memory, &forward};
};

}  // namespace headway::sdk
