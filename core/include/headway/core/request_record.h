// What the engine records about each request's life, for reports. Owned by the engine's metrics
// recorder; read after (or between) runs, never concurrently with the engine thread that writes it.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace headway::core {

inline constexpr double kNever = std::numeric_limits<double>::quiet_NaN();

struct RequestRecord {
  uint64_t id = 0;
  uint32_t class_index = 0;
  uint32_t engine = 0;  // engine that produced its tokens (the decode engine)
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;  // of prompt_tokens, found in a prefix cache when first scheduled
  uint32_t output_tokens = 0;  // generated
  uint32_t preemptions = 0;
  double arrival = kNever;    // seconds, cluster clock
  double scheduled = kNever;  // first admitted into a step (queue time = scheduled - arrival)
  double first_token = kNever;
  double finish = kNever;
  double kv_transfer_seconds = 0.0;
  // Its KV moved here from the engine that prefilled it (kv_transfer_seconds may be 0: the decode
  // engine's prefix cache held every block of it, and nothing was copied).
  bool kv_moved = false;
  // A request whose KV moved: from the end of its prefill to the start of its transfer (room on
  // its decode engine, the end of the step that found it, the transfers before it on its links;
  // 0 where it moved at once, or did not move).
  double kv_wait_seconds = 0.0;
  bool finished = false;            // false: aborted or still running when the run ended
  std::vector<double> token_times;  // time each output token was emitted
  std::vector<int32_t> token_ids;   // the output tokens, in order
};

// One step of one engine.
struct StepRecord {
  uint64_t step = 0;
  uint32_t engine = 0;
  double start = 0.0;
  double duration = 0.0;
  uint32_t prefill_tokens = 0;
  uint32_t decode_tokens = 0;
  uint32_t batch_size = 0;
  uint32_t kv_blocks_used = 0;
  uint32_t preemptions = 0;
};

}  // namespace headway::core
