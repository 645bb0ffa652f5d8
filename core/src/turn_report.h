// The conversation-turn part of a report (Report::turns): built, printed and written as JSON for
// report.cpp. Pure functions; thread-safe.
#pragma once

#include <headway/core/report.h>
#include <headway/core/request_record.h>
#include <headway/core/workload.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headway::core {

// The groups of TurnGroup's doc over `records`, which must be `workload.requests` in order (the
// same ids); empty when they are not, or when no class has conversations.
std::vector<TurnGroup> summarize_turns(const Workload& workload,
                                       const std::vector<RequestRecord>& records);

// One line per group, after a heading; `cached_known`: whether cached tokens were reported.
std::string turns_text(const std::vector<TurnGroup>& turns, bool cached_known);

nlohmann::json turns_to_json(const std::vector<TurnGroup>& turns, bool cached_known);

}  // namespace headway::core
