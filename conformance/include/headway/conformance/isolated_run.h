// Runs a conformance profile in a child process, so that a plugin that crashes (a signal, an
// abort, a call to exit) still gets a report: a FAIL naming what ended the child, instead of
// headway-conformance vanishing with exit 139 and no report for CI to read.
//
// The child runs run_profile() and sends its ProfileResult back over a pipe as JSON. Call it before
// the process starts any thread (fork copies only the calling one); the plugin may already be
// loaded. Threading: blocks the calling thread until the child ends.
#pragma once

#include <headway/conformance/result.h>
#include <headway/conformance/suite.h>

#include <nlohmann/json.hpp>
#include <string>

namespace headway::conformance {

// The round trip through the pipe: every field of the result.
nlohmann::json profile_result_to_json(const ProfileResult& result);
ProfileResult profile_result_from_json(const nlohmann::json& json);

// run_profile(context, profile) in a child. When the child does not hand back a result (it
// crashed, or was still running after `timeout_s` seconds and was killed), the returned one has a
// single FAIL, "suite.completed", saying how the child ended, and every mustpass test of the
// profile listed as missing (so it is not conformant).
ProfileResult run_profile_isolated(const SuiteContext& context, const std::string& profile,
                                   double timeout_s);

}  // namespace headway::conformance
