// kv-transport-core's checks of peer links (abi.h, ABI 1.2): two instances of the transport stand
// for the two processes, joined on one rendezvous id with host-memory regions. A transport without
// peer links, or whose links refuse host memory (NCCL's are for GPUs), gets NOT_SUPPORTED. Every
// wait is bounded, so a link that never comes up or a transfer that never ends shows as a FAIL,
// not a hung suite. See docs/conformance.md.
//
// Threading: one thread.
#pragma once

#include <headway/conformance/result.h>
#include <headway/conformance/suite.h>
#include <headway/core/host_services.h>

#include <vector>

namespace headway::conformance {

// Test ids: kv.peer_links.round_trip, kv.peer_links.close_fails_pending,
// kv.peer_links.unknown_link_refused (core), kv.peer_links.mismatch_not_done (extended).
std::vector<TestResult> run_peer_link_checks(const SuiteContext& context, core::HostServices& host);

}  // namespace headway::conformance
