// The pipe and process plumbing the suite's child processes share: run_profile_isolated()'s forked
// child, the suite run again as another process (run_suite_again(), replay_in_other_process()),
// and headway-conformance's --replay output.
//
// Threading: each call blocks only the calling thread.
#pragma once

#include <headway/conformance/suite.h>
#include <headway/conformance/test_recorder.h>

#include <nlohmann/json.hpp>
#include <optional>
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

// For a same_across_processes test `t`: what the suite, run again with `--replay what` (for at
// most 300 s), printed; nullopt when `t` was skipped (no suite executable to run) or failed (the
// other process did not answer: the message says it was run to `doing`, "plan the traces").
// `metrics` become `t`'s once the other process ran.
std::optional<nlohmann::json> replay_in_other_process(const SuiteContext& context,
                                                      const std::string& what,
                                                      const std::string& doing,
                                                      nlohmann::json metrics, TestRecorder& t);

}  // namespace headway::conformance
