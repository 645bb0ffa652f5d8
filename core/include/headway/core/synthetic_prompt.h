// Token ids for a workload request, which gives lengths but no text: `headway simulate` hands them
// to models that read ids (and to the prefix cache), `headway bench` sends them to a server.
//
// A request's own ids are a function of (workload seed, request id) only, so the same workload
// always sends the same prompts and two requests never share a beginning by accident (which a
// prefix cache would reward). A request of a class with a shared prefix (workload.h) starts with
// the ids of its shared beginning instead, the same for every request that draws it. The turns of
// a conversation continue one stream of ids (its first turn's), so that each turn's prompt begins
// with the previous turn's prompt and answer as ids; the answer's ids are the stream's, not those
// a model generated.
//
// Pure functions; thread-safe.
#pragma once

#include <headway/core/workload.h>

#include <cstdint>
#include <vector>

namespace headway::core {

// Ids are drawn from [first, end).
struct TokenIdRange {
  int32_t first = 32;
  int32_t end = 128;
};

// request.prompt_tokens ids: its shared beginning (request.shared_prefix_tokens ids), then its own.
std::vector<int32_t> synthetic_prompt(uint64_t seed, const WorkloadRequest& request,
                                      TokenIdRange range);

// Positions [from, to) of the same ids (cut to the prompt), in time proportional to to - from:
// the end of a long prompt without its beginning.
std::vector<int32_t> synthetic_prompt_ids(uint64_t seed, const WorkloadRequest& request,
                                          TokenIdRange range, uint32_t from, uint32_t to);

}  // namespace headway::core
