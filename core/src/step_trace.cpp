#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/step_trace.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace headway::core {

StepTraceWriter::StepTraceWriter(const std::filesystem::path& file)
    : path_(file), file_(std::fopen(file.c_str(), "w")) {
  if (file_ == nullptr) throw Error(file.string() + ": cannot open the step trace for writing");
}

StepTraceWriter::~StepTraceWriter() {
  // Not closed by close(): the last buffered lines go out here, and a destructor cannot throw,
  // so a failure is logged.
  if (file_ != nullptr && std::fclose(file_) != 0 && !failed_) {
    spdlog::error("{}: writing the end of the step trace failed", path_.string());
  }
}

void StepTraceWriter::close() {
  std::lock_guard lock(mutex_);
  if (file_ == nullptr) return;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!closed && !failed_) {
    failed_ = true;
    throw Error(path_.string() + ": writing the end of the step trace failed");
  }
}

template <class WriteLine>
void StepTraceWriter::write_guarded(WriteLine&& write_line) {
  std::lock_guard lock(mutex_);
  // After a failure (reported once; the file may end in half a line) or close(): nothing.
  if (failed_ || file_ == nullptr) return;
  try {
    write_line();
    if (std::ferror(file_) != 0) throw std::runtime_error("the C library reported an error");
  } catch (const std::exception& e) {  // fmt reports a failed write as std::system_error
    failed_ = true;
    throw Error(path_.string() + ": writing the step trace failed: " + e.what());
  }
}

void StepTraceWriter::write(uint32_t engine, const StepDetail& step) {
  write_guarded([&] { write_line(engine, step); });
}

void StepTraceWriter::describe_engine(uint32_t index, const Engine& engine) {
  const hw_model_info& info = engine.model_info();
  const uint32_t block_size = engine.config().block_size;
  // The engine's own limits, which may be below the model's: that is what its steps ran under.
  const uint64_t kv_capacity_tokens = static_cast<uint64_t>(engine.kv().total()) * block_size;
  write_guarded([&] {
    // JSON-escaped; dump() throws on a name that is not UTF-8, reported as a failed write.
    const std::string plugin = nlohmann::json(engine.model_name()).dump();
    fmt::print(file_,
               R"({{"engine":{},"model":{{"plugin":{},"layers":{},"hidden":{},"heads":{},)"
               R"("kv_heads":{},"head_dim":{},"vocab":{},"max_model_len":{},)"
               R"("kv_capacity_tokens":{},"kv_bytes_per_token":{},"block_size":{}}}}})"
               "\n",
               index, plugin, info.layers, info.hidden, info.heads, info.kv_heads, info.head_dim,
               info.vocab, engine.max_model_len(), kv_capacity_tokens, info.kv_bytes_per_token,
               block_size);
  });
}

void StepTraceWriter::write_line(uint32_t engine, const StepDetail& step) {
  // The duration to the nanosecond: a cost file fitted from a simulated trace then gives back the
  // simulated model's coefficients (a microsecond is 5e-4 of a 2 ms step).
  fmt::print(file_, R"({{"engine":{},"step":{},"t":{:.6f},"duration":{:.9f},"slices":[)", engine,
             step.step, step.start, step.duration);
  for (size_t i = 0; i < step.slices.size(); ++i) {
    const hw_slice& s = step.slices[i];
    fmt::print(file_, R"({}{{"request":{},"start":{},"tokens":{},"kind":"{}","sample":{}}})",
               i ? "," : "", s.request_id, s.start, s.tokens,
               step.slice_is_decode[i] ? "decode" : "prefill",
               step.slice_samples[i] ? "true" : "false");
  }
  std::fputs("],\"preempted\":[", file_);
  for (size_t i = 0; i < step.preempted.size(); ++i) {
    fmt::print(file_, "{}{}", i ? "," : "", step.preempted[i]);
  }
  fmt::print(file_,
             R"(],"prefill_tokens":{},"decode_tokens":{},"batch_size":{},"kv_blocks_used":{}}})"
             "\n",
             step.prefill_tokens, step.decode_tokens, step.slices.size(), step.kv_blocks_used);
}

}  // namespace headway::core
