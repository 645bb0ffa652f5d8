// Tells the engine process that holds a request's KV in its engine (kv_handoff = "link") to free
// those blocks now, because the router threw the hand-off away (the continuation was cancelled, or
// no decode process took it). Without this the blocks stay taken until kv_link_hold_s.
//
// Fire and forget: SendHeldKv with drop = true, through gRPC's callback API (no thread waits). A
// KV that is no longer held there (already pulled, or its hold time passed) answers NOT_FOUND,
// which is fine; other failures are logged at debug, and the hold time still frees the blocks.
//
// Threading: callable from any thread, gRPC reactions included. `holder` only has to live for the
// call to start (the call keeps its channel).
#pragma once

#include <headway/serving/request_stream.h>

#include "engine_process.h"

namespace headway::serving {

void drop_held_kv(EngineProcess& holder, const KvStage& stage);

}  // namespace headway::serving
