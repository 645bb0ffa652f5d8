// What `headway` says when a plugin's code ends the process: which plugin call was running (the
// thread-local mark of core/plugin_instances.h), for std::terminate (a std::thread never joined,
// an exception out of a noexcept destructor) and for a fatal signal (a null pointer, abort()).
// Before, a crash in a plugin ended the process with nothing on stderr, or with only "terminate
// called without an active exception". Outside plugin calls nothing changes.
//
// Threading: install once, from main(), before any other thread starts.
#pragma once

#include <initializer_list>
#include <string_view>

namespace headway::cmd {

// Sets the terminate handler, and handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT that
// write one line naming the running plugin call, then hand the signal to the handler that was
// there before (AddressSanitizer's in a sanitizer build) or to the default action, so that the
// process still ends by the signal (and dumps core where it would have).
void install_plugin_crash_reports();

// Writes the pieces of `before`, the plugin call running on this thread ("scheduler 'x'
// schedule()") and `after` to stderr when one runs, and returns whether it did.
// Async-signal-safe (an atexit handler or a signal handler may call it).
bool write_running_plugin_call(std::initializer_list<std::string_view> before,
                               std::string_view after);

}  // namespace headway::cmd
