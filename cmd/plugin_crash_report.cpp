#include "plugin_crash_report.h"

#include <headway/core/plugin_instances.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

namespace headway::cmd {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction previous_actions[sizeof(kFatalSignals) / sizeof(kFatalSignals[0])];
// Set once a line was written, so that abort() after the terminate handler's line adds no second.
std::atomic<bool> reported{false};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    default:
      return "SIGABRT";
  }
}

void write_all(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

// Async-signal-safe: reads this thread's mark and writes with write(2).
void say_which_plugin_call_crashed(int sig, siginfo_t* info, void* context) {
  if (!reported.exchange(true)) {
    write_running_plugin_call({"headway: ", signal_name(sig), " during "},
                              " (the plugin's code crashed the process)\n");
  }
  size_t i = 0;
  while (kFatalSignals[i] != sig) ++i;
  const struct sigaction& previous = previous_actions[i];
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
    return;
  }
  if ((previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler != SIG_DFL &&
      previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
    return;
  }
  // The default action, once this handler returns (the signal is blocked until then).
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

[[noreturn]] void say_which_plugin_call_terminated() {
  const std::string call = core::current_plugin_call();
  std::string why;
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      why = std::string(": ") + x.what();
    } catch (...) {
      why = ": an exception of an unknown type";
    }
  }
  if (call.empty()) {
    std::fprintf(stderr, "headway: terminated%s\n", why.c_str());
  } else {
    std::fprintf(stderr, "headway: terminated during %s (the plugin's code ended the process)%s\n",
                 call.c_str(), why.c_str());
  }
  std::fflush(stderr);
  reported.store(true);
  std::abort();
}

}  // namespace

bool write_running_plugin_call(std::initializer_list<std::string_view> before,
                               std::string_view after) {
  const char* kind = nullptr;
  std::string_view name;
  const char* function = nullptr;
  if (!core::current_plugin_call_parts(kind, name, function)) return false;
  for (const std::string_view piece : before) write_all(piece);
  write_all(kind);
  write_all(" '");
  write_all(name);
  write_all("' ");
  write_all(function);
  write_all("()");
  write_all(after);
  return true;
}

void install_plugin_crash_reports() {
  std::set_terminate(say_which_plugin_call_terminated);
  struct sigaction action {};
  action.sa_sigaction = say_which_plugin_call_crashed;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < sizeof(kFatalSignals) / sizeof(kFatalSignals[0]); ++i) {
    sigaction(kFatalSignals[i], &action, &previous_actions[i]);
  }
}

}  // namespace headway::cmd
