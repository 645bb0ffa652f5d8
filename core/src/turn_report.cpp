#include "turn_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace headway::core {

namespace {

// Turns 1-8 one group each, then groups that double: 9-16, 17-32, ... (0-based `turn` in).
size_t group_of(uint32_t turn) {
  const uint32_t n = turn + 1;
  if (n <= 8) return n - 1;
  size_t group = 8;
  for (uint32_t last = 16; n > last; last *= 2) ++group;
  return group;
}

std::pair<uint32_t, uint32_t> turns_of(size_t group) {
  if (group < 8) return {static_cast<uint32_t>(group + 1), static_cast<uint32_t>(group + 1)};
  const uint32_t last = 16u << (group - 8);
  return {last / 2 + 1, last};
}

}  // namespace

std::vector<TurnGroup> summarize_turns(const Workload& workload,
                                       const std::vector<RequestRecord>& records) {
  const bool conversations = std::any_of(workload.classes.begin(), workload.classes.end(),
                                         [](const RequestClass& c) { return c.turns > 1; });
  if (!conversations || records.size() != workload.requests.size()) return {};
  std::vector<TurnGroup> groups;
  std::vector<std::vector<double>> ttfts;
  std::vector<uint32_t> last_seen;  // per group, its last turn present (a group names no more)
  for (size_t i = 0; i < records.size(); ++i) {
    const WorkloadRequest& request = workload.requests[i];
    const RequestRecord& record = records[i];
    if (record.id != request.id) return {};
    if (request.class_index >= workload.classes.size() ||
        workload.classes[request.class_index].turns <= 1) {
      continue;
    }
    const size_t g = group_of(request.turn);
    if (g >= groups.size()) {
      for (size_t k = groups.size(); k <= g; ++k) {
        TurnGroup& added = groups.emplace_back();
        std::tie(added.first_turn, added.last_turn) = turns_of(k);
      }
      ttfts.resize(groups.size());
      last_seen.resize(groups.size(), 0);
    }
    last_seen[g] = std::max(last_seen[g], request.turn + 1);
    TurnGroup& group = groups[g];
    ++group.requests;
    if (!std::isnan(record.first_token)) {
      group.prompt_tokens += record.prompt_tokens;
      group.cached_prompt_tokens += record.cached_tokens;
    }
    if (!record.finished) continue;
    ++group.finished;
    ttfts[g].push_back(record.first_token - record.arrival);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g].ttft = summarize(std::move(ttfts[g]));
    if (last_seen[g] != 0) groups[g].last_turn = last_seen[g];
  }
  std::erase_if(groups, [](const TurnGroup& g) { return g.requests == 0; });
  return groups;
}

std::string turns_text(const std::vector<TurnGroup>& turns, bool cached_known) {
  if (turns.empty()) return {};
  std::string text = fmt::format("{:<10}{:>9}{:>10}{:>11}{:>11}{:>9}\n", "turn", "requests",
                                 "finished", "TTFT p50", "TTFT p99", "cached");
  for (const TurnGroup& g : turns) {
    const std::string name = g.first_turn == g.last_turn
                                 ? std::to_string(g.first_turn)
                                 : fmt::format("{}-{}", g.first_turn, g.last_turn);
    const std::string cached =
        cached_known && g.prompt_tokens > 0
            ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(g.cached_prompt_tokens) /
                                         static_cast<double>(g.prompt_tokens))
            : "-";
    text += fmt::format("{:<10}{:>9}{:>10}{:>11}{:>11}{:>9}\n", name, g.requests, g.finished,
                        duration_text(g.ttft.p50), duration_text(g.ttft.p99), cached);
  }
  return text;
}

nlohmann::json turns_to_json(const std::vector<TurnGroup>& turns, bool cached_known) {
  nlohmann::json out = nlohmann::json::array();
  for (const TurnGroup& g : turns) {
    out.push_back({{"first_turn", g.first_turn},
                   {"last_turn", g.last_turn},
                   {"requests", g.requests},
                   {"finished", g.finished},
                   {"ttft", summary_json(g.ttft)},
                   {"prompt_tokens", g.prompt_tokens},
                   {"cached_prompt_tokens",
                    cached_known ? nlohmann::json(g.cached_prompt_tokens) : nlohmann::json()}});
  }
  return out;
}

}  // namespace headway::core
