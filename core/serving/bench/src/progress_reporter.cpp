#include "headway/serving/bench/progress_reporter.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

namespace headway::serving::bench {

bool is_terminal(std::FILE* stream) { return ::isatty(::fileno(stream)) == 1; }

std::string ProgressReporter::line(size_t total, size_t sent, size_t finished, size_t failed,
                                   double elapsed_s, bool with_bar) {
  std::string bar;
  if (with_bar) {
    constexpr size_t kWidth = 30;
    const size_t filled = total == 0 ? kWidth : finished * kWidth / total;
    bar = fmt::format("[{}{}] ", std::string(filled, '#'), std::string(kWidth - filled, ' '));
  }
  return fmt::format("bench: {}{}/{} finished ({} failed), {} sent, {} in flight, {:.1f} s", bar,
                     finished, total, failed, sent, sent >= finished ? sent - finished : 0,
                     elapsed_s);
}

ProgressReporter::ProgressReporter(std::FILE* out, bool terminal, size_t total,
                                   const ProgressCounters& counters, const RunClock& clock,
                                   double interval_s)
    : out_(out),
      terminal_(terminal),
      total_(total),
      counters_(counters),
      clock_(clock),
      interval_s_(interval_s) {
  ticker_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    const auto interval = std::chrono::duration<double>(interval_s_);
    while (!wake_.wait_for(lock, interval, [&] { return stopping_; })) print(false);
  });
}

ProgressReporter::~ProgressReporter() { stop(); }

void ProgressReporter::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  ticker_.join();
  print(true);
}

void ProgressReporter::print(bool final_line) {
  // Finished before sent: a request counts as sent before it can finish, so in this order the
  // in-flight figure cannot go negative.
  const size_t finished = counters_.finished.load();
  const size_t failed = counters_.failed.load();
  const size_t sent = counters_.sent.load();
  const std::string text = line(total_, sent, finished, failed, clock_.now(), terminal_);
  if (terminal_) {
    // "\r" + clear to the end of the line ("\x1b[K"), so a shorter line leaves no leftovers.
    std::fprintf(out_, "\r%s\x1b[K%s", text.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

}  // namespace headway::serving::bench
