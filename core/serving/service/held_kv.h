// The prefill side of KV moved over peer links ([server] kv_handoff = "link"): prefilled
// requests' KV that stays in its engine's memory, by name, until the decode process asks for it.
// A driver holds a request's blocks here when its prefill ends; a gRPC handler thread posts the
// send of those blocks on a peer link when the decode process asks (SendHeldKv); the driver frees
// the blocks once the send is over, or when nobody asked within the hold time.
//
// Ownership: entries own a copy of their block list (the transport borrows it while sending).
// Threading: every method is safe from any thread; one mutex guards the entries, and transport
// calls are made under it (they do not block), so an entry is never freed while a send of it is
// being posted. Lock order: LocalGenerationService's mutex (its drain counts the entries), then
// this mutex (KvHandoff takes none).
#pragma once

#include <headway/abi.h>
#include <headway/serving/request_stream.h>

#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <vector>

namespace headway::serving {

class KvHandoff;

// Throws ServiceError (kInvalidArgument) unless `name` can name held KV (a stage's name): checked
// before anything else about a request that names one.
void check_held_kv_name(const std::string& name);

class HeldKv {
 public:
  using Clock = std::chrono::steady_clock;

  explicit HeldKv(KvHandoff& handoff, double hold_seconds)
      : handoff_(handoff),
        hold_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(hold_seconds))) {}
  HeldKv(const HeldKv&) = delete;
  HeldKv& operator=(const HeldKv&) = delete;

  // Holds request `id`'s KV (`stage` describes it; stage.held is set) in blocks `blocks` of
  // `memory`, of engine `engine`, until it is sent or its hold time passes.
  void hold(uint32_t engine, uint64_t id, const KvStage& stage, const hw_memory_desc& memory,
            std::vector<uint32_t> blocks);

  // Posts the send of held KV `stage.shm_name` on peer link `link` (or frees it: drop). Throws
  // ServiceError: kNotFound when nothing of that name is held (never, expired, sent or dropped),
  // kInvalidArgument when `stage`'s numbers are not the held KV's (it is freed then), or the
  // transport's error when the send cannot be posted (freed too).
  void send(uint64_t link, const KvStage& stage, bool drop);

  // For engine `engine`'s driver: appends to `release` the requests whose blocks can be freed
  // (their send is over, they were dropped, or their hold time passed) and forgets them. Returns
  // how many of the engine's entries remain.
  size_t collect(uint32_t engine, std::vector<uint64_t>& release);

  // How many requests' KV is held or being sent, over every engine (a drain waits for them).
  size_t count();

  // Engine `engine` shuts down: no more sends of its KV; waits for those in flight (the transport
  // reads its blocks) and appends every one of its requests to `release`.
  void close(uint32_t engine, std::vector<uint64_t>& release);

 private:
  enum class State { kHeld, kSending, kOver };
  struct Entry {
    uint32_t engine = 0;
    uint64_t id = 0;
    KvStage stage;
    hw_memory_desc memory{};
    std::vector<uint32_t> blocks;
    Clock::time_point expires;
    State state = State::kHeld;
    uint64_t transfer = 0;
  };
  // Updates a sending entry from the transport (kOver once its send is done or failed).
  void poll(Entry& entry);

  KvHandoff& handoff_;
  const Clock::duration hold_;
  std::mutex mutex_;
  std::list<Entry> entries_;  // few at a time: a linear search is fine
};

}  // namespace headway::serving
