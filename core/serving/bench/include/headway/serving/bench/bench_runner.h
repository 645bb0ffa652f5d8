// One benchmark run: every request of a workload sent to a server at its arrival time (open loop,
// open_loop_dispatcher.h), streamed and measured on the client (completion_client.h), and the
// measurements turned into the RequestRecords that core::build_report reads, so that a measured
// run and a simulated one of the same workload give reports of the same shape.
//
// Records of a bench run: arrival = the send time (TTFT is measured from the send; the client's
// own lateness is reported apart, as BenchRun::lateness), first_token, token_times, finish and
// output_tokens from the stream; scheduled is unknown to a client (NaN, so the report has no
// queue times); finished = the stream succeeded. The run clock starts when the run starts, so
// arrivals line up with the workload's.
//
// Threading: run_bench blocks its caller and runs its own sender threads.
#pragma once

#include <headway/core/request_record.h>
#include <headway/core/workload.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "headway/serving/bench/completion_request.h"
#include "headway/serving/bench/progress_reporter.h"
#include "headway/serving/bench/server_endpoint.h"
#include "headway/serving/bench/stream_measurement.h"

namespace headway::serving::bench {

struct BenchOptions {
  ServerEndpoint endpoint;
  std::string model;  // empty: no "model" field
  TokenIdRange token_ids;
  size_t max_concurrency = 256;
  ProgressCounters* progress = nullptr;  // borrowed; updated as requests go and finish when set
  // Borrowed; may be null. Once true (a signal handler sets it), no further request is sent and
  // the streams in flight are closed at their next bytes (kInterrupted); run_bench then returns
  // what it has.
  const std::atomic<bool>* stop = nullptr;
};

struct BenchRun {
  std::vector<core::RequestRecord> records;  // one per workload request, in workload order
  // The same order. Their token_times have moved into the records (a long run holds millions of
  // them); output_tokens still counts them.
  std::vector<StreamResult> results;
  std::vector<double> lateness;  // send time - scheduled arrival, seconds
  size_t sender_threads = 0, peak_in_flight = 0;
  double wall_seconds = 0;  // start of the run to the end of its last stream
  // Requests sent: all of them, or fewer when `stop` ended the run early (the records of the rest
  // have no send) or when turns of a conversation that waits for answers followed a failed one.
  size_t requests_sent = 0;
  std::vector<uint8_t> sent;  // per request, in workload order: 1 where it was sent
  // Turns never sent after a failed one (their results fail as kEarlierTurnFailed).
  size_t unsent_turns = 0;
  // Answers of conversations that wait for answers that came without their ids (a server that
  // ignores return_token_ids): the next turns resent stand-in ids instead.
  size_t answers_without_ids = 0;
  bool interrupted = false;
  // Some stream's usage said how many of its prompt tokens the server found cached (the records'
  // cached_tokens are 0 where none said).
  bool cached_tokens_reported = false;
};

// Throws core::Error for options that cannot work (max_concurrency 0); server and network
// failures are per-request results, never exceptions.
BenchRun run_bench(const core::Workload& workload, const BenchOptions& options);

// The record of one measured request (see above). Moves result.token_times into the record.
core::RequestRecord take_record(const core::WorkloadRequest& request, StreamResult& result);

// Of an interrupted run: the workload's requests that were sent (the first ones in arrival
// order, and those of conversations that waited for answers when they were released) and the
// turns a failure dropped before the stop (kEarlierTurnFailed), with `run`'s records, results,
// lateness and `sent` cut to them in the same order.
core::Workload keep_sent(const core::Workload& workload, BenchRun& run);

}  // namespace headway::serving::bench
