// Gives the memory a large request body's parse freed back to the system.
//
// A body is parsed into a tree of many small allocations (nlohmann::json: 24 to 67 bytes of heap
// per body byte for bodies of small values, helper-132). glibc's allocator keeps what a thread
// freed in that thread's arena, and the HTTP server's 320 worker threads spread requests over up
// to 8 × cores arenas: each came to hold one large request's peak, and RSS rose by about 65 MB
// with each of sixteen 0.9 MB Responses requests, never to fall. malloc_trim() returns the free
// pages of every arena.
//
// Threading: any thread.
#pragma once

#include <cstddef>

namespace headway::serving::http {

// Bodies from this size on are followed by a trim; smaller ones cost nothing here (a trim walks
// every arena under its lock: fine now and then, not per request).
inline constexpr size_t kTrimAfterBodyBytes = size_t{1} << 20;

// Calls malloc_trim(0) when `body_bytes` >= kTrimAfterBodyBytes (glibc; elsewhere nothing), once
// the request's parse has been freed, unless another thread trims or trimmed less than a second
// ago: the trim is then left pending. Returns whether it trimmed.
bool return_freed_memory_after_body(size_t body_bytes);

// The pending trim, if one is and a second has passed since the last: for a thread that wakes
// now and then (the slow-client reaper's scans), so that a burst of large bodies is followed by a
// trim within about a second, whether or not another large body comes. Returns whether it trimmed.
bool return_freed_memory_if_pending();

}  // namespace headway::serving::http
