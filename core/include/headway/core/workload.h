// Workloads: the requests that `headway simulate` and `headway bench` send, read from a TOML file.
//
// A workload is either *generated* (an arrival process plus request classes with length
// distributions) or a *trace replay* (a CSV of real requests), optionally with generated classes
// mixed in. docs/workloads.md has the same reference with worked examples.
//
// Top level
//   seed        int >= 0, default 0. Same file + same seed -> identical workload, on any platform.
//   count       int >= 1: number of requests to generate.
//   duration    number > 0, seconds: generate arrivals in [0, duration).
//               A generated workload with a Poisson process needs count or duration (or both:
//               whichever ends first). With a trace, count is not allowed (use [trace].limit);
//               duration keeps the rows that arrive before it.
//   time_scale  number > 0, default 1: multiplies every arrival time (and so every gap), after the
//               requests have been chosen: > 1 slows the load down, < 1 raises it. It never changes
//               which requests are in the workload or their lengths.
//
// [arrival] (generated workloads only)
//   process = "poisson", rate = R   (requests/s, > 0): exponential gaps; each arrival's class is
//                                   drawn by share.
//   process = "fixed", times = [..] (seconds >= 0): one request per time (sorted, stable); each
//                                   one's class is drawn by share. count/duration, if given, keep
//                                   the first `count` times / those before `duration`.
//
// [[classes]] (at least one for a generated workload; optional with [trace])
//   name      string, required, unique.
//   share     number > 0, required. Generated workloads: relative weights, normalised to sum 1.
//             With [trace]: the fraction of the *total* request count (trace rows + mixed-in
//             requests), so the shares must sum to < 1; class i gets round(share_i * total)
//             requests arriving as a Poisson process over the trace's span (a Poisson process
//             conditioned on that count), drawn from the same seed.
//   long      bool, optional: marks a class whose removal defines the HOL and stall factors. When
//             no class (nor [trace].long) is marked and there are >= 2 classes, the class with the
//             largest nominal mean prompt length is the long one (first on ties).
//   priority  int, default 0: copied to each request.
//   max_tokens  int in [1, 1073741824], optional: what the class's clients ask for, when their
//             answers end by themselves before it (a stop token). Each request's output is its
//             answer's length, cut to max_tokens; simulated engines are told max_tokens and end
//             the answer as at a stop token after `output` tokens. What reserves KV and counts as
//             decode work still to come is max_tokens, so KV reservation and routing by outstanding
//             tokens meet the room answers ask for and do not use. Without it, each request asks
//             for its output exactly. `headway bench` sends the output (a served model's answers
//             end where the model ends them), and its prediction simulates what it sends.
//   shared_prefix  inline table { tokens = N, count = K }, optional: every request of the class
//             begins with one of K shared beginnings of N tokens (system prompts, few-shot
//             examples, a shared document), chosen by a hash of the seed and the request id (K >=
//             1, default 1; N in [1, 1073741824]); its prompt is those N tokens followed by
//             `prompt` tokens of its own. What a prefix cache can reuse (docs/serving.md).
//   conversation  inline table { turns = T, gap = G }, optional (not with [trace]): each arrival
//             of the class starts a conversation of T turns (T in [2, 1000]), turn k arriving k * G
//             seconds after the first (G > 0; open loop: it does not wait for the answer before).
//             Turn k's prompt is turn k-1's prompt, then its answer (`output` tokens, cut to
//             max_tokens), then a new message of `prompt` tokens, all as ids (synthetic_prompt.h)
//             continuing one stream per conversation, so each turn begins as the previous one
//             did; the shared prefix, if any, is the same for every turn. count and rate count
//             conversations, not requests; duration keeps the turns that arrive before it.
//             With `wait_for_answer = true` (default false) the loop closes: turn k is sent G
//             seconds after turn k-1's answer ended, and its prompt carries the answer's ids as
//             the server (or simulated engine) produced them (arrival_schedule.h); a turn's
//             `arrival` is then its nominal time (k * G after the first, as if answers took no
//             time), which orders the workload and which duration cuts by.
//   prompt, output  inline tables, required, each one of:
//     { dist = "fixed", value = N }
//     { dist = "uniform", min = A, max = B }                 integers, inclusive, A <= B
//     { dist = "lognormal", mean = M, sigma = S, min = A, max = B }
//         M is the arithmetic MEAN of the unclamped distribution (so mu = ln M - S^2/2; the
//         median is M * exp(-S^2/2)); S >= 0; the sample is rounded to the nearest integer and
//         clamped to [A, B]; min defaults to 1, max to 1073741824.
//     { dist = "trace", file = "t.csv", column = "ContextTokens" }
//         sample a row uniformly from that column of a trace CSV (column defaults to ContextTokens
//         for prompt, GeneratedTokens for output).
//   Token counts are integers in [1, 1073741824]; values sampled from a trace are clamped to >= 1
//   (a trace row with 0 generated tokens becomes a 1-token output, as every request must produce
//   its first token to have a TTFT).
//
// [trace] (replay)
//   file        CSV path, required. Columns TIMESTAMP,ContextTokens,GeneratedTokens (any order,
//               extra columns ignored). TIMESTAMP is `YYYY-MM-DD HH:MM:SS[.fraction]` or plain
//               seconds. Arrival = seconds since the earliest row (the first one in a sorted
//               trace); rows with equal timestamps arrive in file order. Zero outputs become 1 (see
//               above).
//   name        class name of the replayed rows, default "trace".
//   limit       int >= 1: replay only the first `limit` rows of the file.
//   time_scale  number > 0, default 1: scales the trace's arrivals (before mixing; the top-level
//               time_scale applies on top of it).
//   long, priority, max_tokens  as for [[classes]], for the replayed rows.
//
// Relative paths (trace files) are resolved against the directory of the workload file.
// Unknown keys, wrong types and out-of-range values are errors; every error message names the
// file, the table path and key, and what is allowed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headway::core {

struct RequestClass {
  std::string name;
  bool is_long = false;
  int32_t priority = 0;
  double share = 0.0;  // as written in the file (not normalised); 0 for a trace class
  // Nominal mean prompt length, for the long-class choice: the prompt distribution's, plus the
  // shared beginning, averaged over a conversation's turns (answers at most max_tokens).
  double mean_prompt_tokens = 0.0;
  uint32_t shared_prefix_tokens = 0;  // 0: no shared beginning
  uint32_t shared_prefixes = 0;       // how many different ones
  uint32_t max_tokens = 0;            // what its clients ask for; 0: each request's output
  // Conversations: each arrival of the class is the first of `turns` requests, turn k arriving
  // k * turn_gap seconds after the first, its prompt the previous turn's prompt, its answer and a
  // new message. 1: requests stand alone.
  uint32_t turns = 1;
  double turn_gap = 0.0;
  // A closed loop: each later turn is sent turn_gap (scaled as arrivals are) after the previous
  // turn's answer ended, with that answer's own ids; `arrival` is only its nominal time.
  bool waits_for_answers = false;
};

struct WorkloadRequest {
  uint64_t id;
  uint32_t class_index;  // into Workload::classes
  double arrival;        // seconds from the start of the workload
  uint32_t prompt_tokens;
  uint32_t output_tokens;
  int32_t priority = 0;
  // Of prompt_tokens, the first ones are its class's shared beginning number `shared_prefix`
  // (synthetic_prompt.h gives their ids).
  uint32_t shared_prefix_tokens = 0;
  uint32_t shared_prefix = 0;
  // What the client asks for (>= output_tokens, whose answer ends by itself there); 0: exactly
  // output_tokens. asked_tokens() reads it.
  uint32_t max_tokens = 0;
  uint32_t asked_tokens() const { return max_tokens != 0 ? max_tokens : output_tokens; }
  // Of a conversation (RequestClass::turns > 1): which turn this is, 0 the first, and for a later
  // turn the id of the first, whose token stream every turn's own ids continue
  // (synthetic_prompt.h). conversation_id() is the first turn's id, or the request's own.
  uint32_t turn = 0;
  uint64_t first_turn = 0;  // read only when turn > 0
  uint64_t conversation_id() const { return turn > 0 ? first_turn : id; }
};

// The latest arrival a workload may have, in seconds. Past about 1e9 s a double's rounding
// swallows step times (and an overflow to inf would stall a simulation, blamed on the
// deployment; `headway bench`'s clock would wrap): a workload file, or a rate scaled from it,
// that goes further is refused.
inline constexpr double kMaxArrivalSeconds = 1e9;

// A value type: cheap to move, safe to share read-only between threads.
struct Workload {
  std::string source;  // file path it came from
  uint64_t seed = 0;
  std::vector<RequestClass> classes;
  // Sorted by arrival (stable: equal times keep file/generation order); ids 0..n-1 in that order.
  std::vector<WorkloadRequest> requests;
  // What an operator should see before trusting the results, though it does not stop the run: a
  // trace whose rows are not in time order. Each names the file and line. Callers print them.
  std::vector<std::string> warnings;

  // Whether some request belongs to a long class: the HOL and stall factors need one (a slice of a
  // workload, --num-requests, may have none although the workload has a long class).
  bool has_long_requests() const;
  // Same classes; the requests minus those of long classes, ids and arrivals unchanged (so ids are
  // no longer contiguous). The baseline run for the HOL and stall factors.
  Workload without_long_classes() const;
};

// Reads and generates the workload described by `file` (format above). `seed`, when given,
// replaces the file's `seed` (`headway simulate --seed/--seeds`: the same workload drawn again).
// Throws headway::core::Error (HW_NOT_FOUND for a missing file, HW_INVALID_ARGUMENT otherwise)
// naming the file, the key and what is allowed. Thread-safe: touches no shared state.
Workload load_workload(const std::filesystem::path& file,
                       std::optional<uint64_t> seed = std::nullopt);

// The same from TOML text already in memory (e.g. a built-in default). `file` names the text in
// messages and in Workload::source, and relative trace paths resolve against its directory (the
// working directory when it has none, as for "<built-in workload>"). Thread-safe.
Workload parse_workload(std::string_view text, const std::filesystem::path& file,
                        std::optional<uint64_t> seed = std::nullopt);

// Whether the two workloads hold the same requests (class, arrival, lengths, priority, shared
// beginning): a seed
// sweep over a workload that draws nothing at random (a plain trace replay) repeats one run.
bool same_requests(const Workload& a, const Workload& b);

}  // namespace headway::core
