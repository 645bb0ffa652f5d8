// `headway profile --from-step-trace steps.jsonl --check twin.toml`: replays every traced step on
// the simulated model of a deployment (a sim model's roofline or cost file) and prints how far its
// step times are from the traced ones: the per-step error behind a twin's end-to-end error, e.g.
// a served H200 run against the grid-fitted cost file (docs/profiling.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headway::cmd {

// Prints the table to stdout. Throws core::Error naming the file for a trace the reader refuses,
// a deployment that cannot be loaded, or a model that does not report step durations (a real
// one: its steps would be timed, not predicted).
void check_trace_against(const std::string& trace, std::optional<uint32_t> engine,
                         const std::string& config, const std::vector<std::string>& plugin_dirs);

}  // namespace headway::cmd
