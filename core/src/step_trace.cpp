#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/step_trace.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

namespace headway::core {

StepTraceWriter::StepTraceWriter(const std::filesystem::path& file)
    : path_(file), file_(std::fopen(file.c_str(), "w")) {
  if (file_ == nullptr) throw Error(file.string() + ": cannot open the step trace for writing");
}

StepTraceWriter::~StepTraceWriter() {
  // The last buffered lines go out here; a destructor cannot throw, so a failure is logged.
  if (std::fclose(file_) != 0 && !failed_) {
    spdlog::error("{}: writing the end of the step trace failed", path_.string());
  }
}

void StepTraceWriter::write(uint32_t engine, const StepDetail& step) {
  std::lock_guard lock(mutex_);
  if (failed_) return;  // the first failure was reported; the file may end in half a line
  try {
    write_line(engine, step);
    if (std::ferror(file_) != 0) throw std::runtime_error("the C library reported an error");
  } catch (const std::exception& e) {  // fmt reports a failed write as std::system_error
    failed_ = true;
    throw Error(path_.string() + ": writing the step trace failed: " + e.what());
  }
}

void StepTraceWriter::write_line(uint32_t engine, const StepDetail& step) {
  fmt::print(file_, R"({{"engine":{},"step":{},"t":{:.6f},"duration":{:.6f},"slices":[)", engine,
             step.step, step.start, step.duration);
  for (size_t i = 0; i < step.slices.size(); ++i) {
    const hw_slice& s = step.slices[i];
    fmt::print(file_, R"({}{{"request":{},"start":{},"tokens":{},"kind":"{}"}})", i ? "," : "",
               s.request_id, s.start, s.tokens, step.slice_is_decode[i] ? "decode" : "prefill");
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
