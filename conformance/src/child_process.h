// The pipe and process plumbing the suite's child processes share: run_profile_isolated()'s forked
// child, and the suite run again as another process (run_suite_again()).
//
// Threading: each call blocks only the calling thread.
#pragma once

#include <headway/conformance/suite.h>

#include <string>
#include <string_view>

namespace headway::conformance {

// Writes all of `text` to `fd`; false when the reader went away.
bool write_all(int fd, std::string_view text);

// Reads `fd` until the writer closes its end (true), or until `timeout_s` has passed or poll()
// fails (false: the caller kills the writer).
bool read_all(int fd, double timeout_s, std::string& text);

// How a child that waitpid() reported as `status` ended: "exited with status 3", "was killed by
// signal 11 (Segmentation fault)".
std::string ending_of(int status);

// What run_suite_again() gives back: the JSON the other process printed, or why there is none.
struct OtherProcessOutput {
  std::string json;   // what it printed on stdout, parsed (valid JSON) when `error` is empty
  std::string error;  // how the other process failed: "exited with status 2", "was still running…"
};

// Runs `context.suite_executable` (headway-conformance) again as a new process, with the same
// plugin, options, seed and config directory and `--replay what`, and parses what it prints on
// its stdout (where it writes nothing else: the plugin's own output goes to stderr in that mode).
// A new process, not a fork: the plugin is loaded afresh (its statics initialised again, at other
// addresses), so that state a plugin seeds per process shows. Its stderr is this process's. It is
// killed after `timeout_s`, or when this process dies. Throws core::Error when no pipe or process
// can be made.
OtherProcessOutput run_suite_again(const SuiteContext& context, const std::string& what,
                                   double timeout_s);

}  // namespace headway::conformance
