// What the service keeps about one request between admission and finish, on the driver thread
// of the engine that serves it.
//
// Ownership: created by submit(), handed to the driver through its inbox, destroyed by the driver
// when the request finishes (which releases the service's reference to the stream and the
// engine's RequestRecord). Threading: touched only by that driver thread once handed over.
#pragma once

#include <headway/core/engine.h>
#include <headway/core/request_record.h>
#include <headway/serving/metrics_serving.h>
#include <headway/serving/request_stream.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "abort_cause.h"
#include "expected_handoffs.h"

namespace headway::serving {

struct InFlightRequest {
  std::string id;                         // the client's (or the service's) request id
  uint64_t numeric_id = 0;                // the engine's id for it (core::NewRequest::id)
  std::shared_ptr<RequestStream> stream;  // shared with the frontend
  core::RequestRecord record;             // filled by the engine as the request progresses
  RequestSeries series;                   // metrics of its (engine, class)
  double last_token_time = 0.0;
  AbortCause abort_cause = AbortCause::kNone;  // set by an abort, see combined()
  // Disaggregated: the engine that decodes it after the prefill engine's driver handed it over.
  uint32_t decode_engine = std::numeric_limits<uint32_t>::max();
  // Disaggregated: the decode engine's series, which `series` becomes at the hand-off.
  std::optional<RequestSeries> decode_series;
  // Disaggregated: counted in the decode engine's load until its hand-off gets there.
  ExpectedHandoff expected_at_decode;
  // A router's prefill_only request: after its prefill, stage its KV for another process.
  bool stage_kv = false;
  // Continued from another process's prefill: its first token was timed there, not here.
  bool continued = false;
  // Bytes of its KV fetched from another host before it continued here (Timings).
  uint64_t kv_network_bytes = 0;
  // Of the KV moved here, the tokens this engine's prefix cache held (Timings).
  uint32_t kv_cached_tokens = 0;
};

}  // namespace headway::serving
