// Peer links between engine processes ([server] kv_handoff = "link"): the decode side pulls a
// request's KV from the prefill process that holds it (held_kv.h) over a link of their KV
// transports (abi.h's peer_* functions: NCCL send/recv between their GPUs).
//
// A link joins two processes' transports: the decode process makes a rendezvous id, joins it as
// rank 1 and asks the prefill process to join it as rank 0 (OpenKvLink); then, for every request,
// it asks the prefill process to post the send of the held KV (SendHeldKv) and, once that
// returned, posts the matching receive into the blocks its engine reserved. Sends and receives on
// a link are matched in posting order, so the pulls from one prefill process run one after the
// other on a thread of its own (the next request is asked for only once the previous receive is
// posted; the copies themselves still queue back to back on the transport). A link that failed is
// closed and the next pull opens another. A source that cannot be reached (its link cannot be
// opened) declines what is queued for it at once, and new pulls for a few seconds after.
//
// Link names are "<pid>-<random>-<n>": the part before the last '-' names the decode process's
// KvLinks, so a prefill process that is asked to open a link closes the older links of the same
// decode process (abandoned: it keeps one per source), which fails the sends still posted on them
// instead of leaving them (and their blocks) until the transport's timeout.
//
// Ownership: borrows the handoff (transport) and the peers (the RPC client); owns its threads and
// links. Threading: every public method is safe from any thread.
#pragma once

#include <headway/abi.h>
#include <headway/serving/kv_link_peers.h>
#include <headway/serving/request_stream.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace headway::serving {

class KvHandoff;
class HeldKv;

// One request's pull, shared between the decode engine's driver and the link thread.
struct KvPull {
  enum class State { kQueued, kRequesting, kPosted, kDeclined, kCancelled };
  std::atomic<State> state{State::kQueued};
  // Set before state becomes kPosted (the receive's transport handle) or kDeclined (why).
  uint64_t transfer = 0;
  std::string problem;

  KvStage held;
  hw_memory_desc memory{};
  std::vector<uint32_t> blocks;  // the destination; borrowed by the transport once posted
  bool drop = false;             // only tell the holder to free it
};

class KvLinks {
 public:
  // `peers`: how this process reaches others (null: it pulls from nobody). `memory`: this
  // process's engine KV memory, which the links it joins carry.
  KvLinks(KvHandoff& handoff, std::shared_ptr<KvLinkPeers> peers, const hw_memory_desc& memory);
  ~KvLinks();  // declines what is queued, waits for requests in progress, closes every link
  KvLinks(const KvLinks&) = delete;
  KvLinks& operator=(const KvLinks&) = delete;

  // --- Decode side ---
  bool can_pull() const { return peers_ != nullptr; }
  // Queues a pull of `held` (from held.source_address) into `blocks` of `memory`.
  std::shared_ptr<KvPull> pull(const KvStage& held, const hw_memory_desc& memory,
                               std::vector<uint32_t> blocks);
  // Tells the holder of `held` to free it (best effort, in the background).
  void drop(const KvStage& held);
  // Takes a queued pull back (true); false once it is being requested or later.
  bool cancel(KvPull& pull);
  // Waits until `pull` is no longer queued or being requested.
  static void wait_settled(const KvPull& pull);

  // --- Prefill side ---
  // Joins `rendezvous` as rank 0 of link `name` (OpenKvLink). Throws ServiceError.
  void accept(const std::string& name, const std::vector<uint8_t>& rendezvous);
  // Posts the send of `held` on link `name`, or drops it (SendHeldKv). Throws ServiceError
  // (kUnavailable: no such link, or it failed; open another).
  void send(HeldKv& held_kv, const std::string& name, const KvStage& held, bool drop);
  // Closes the links other processes opened here (shutting down: sends still posted fail now).
  void close_accepted();

 private:
  struct Source;  // one prefill process: its queue, its thread and its link
  void enqueue(std::shared_ptr<KvPull> pull);
  void serve(Source& source);
  void pull_one(Source& source, KvPull& pull);
  // The link to `source`, opened when there is none or the last one failed. Throws.
  uint64_t link_to(Source& source, const hw_memory_desc& memory);
  // Waits until `link` is up; throws (and closes it) when it failed or took too long.
  void wait_up(uint64_t link, const std::string& name);
  // The source could not be reached: declines its queue, and what is queued for a while.
  void mark_unreachable(Source& source, const std::string& problem);

  KvHandoff& handoff_;
  const std::shared_ptr<KvLinkPeers> peers_;
  const hw_memory_desc memory_;

  std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::string, std::unique_ptr<Source>> sources_;  // decode side, by address
  struct Accepted {
    uint64_t link = 0;  // 0 while being joined (the name is taken)
    uint64_t last_used = 0;
  };
  std::map<std::string, Accepted> accepted_;  // prefill side, by link name
  uint64_t use_counter_ = 0;                  // orders the accepted links by last use
  const std::string name_prefix_;             // "<pid>-<random>": this process's link names
  uint64_t next_link_ = 1;
};

}  // namespace headway::serving
