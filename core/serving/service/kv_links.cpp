#include "kv_links.h"

#include <fmt/format.h>
#include <headway/serving/generation_service.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <optional>
#include <random>

#include "held_kv.h"
#include "kv_handoff.h"

namespace headway::serving {
namespace {

// How long a link may take to come up before it is given up (NCCL's bootstrap is well within).
constexpr std::chrono::seconds kLinkUpTimeout{60};
// Links a prefill process keeps joined (each may hold GPU memory: an NCCL communicator); beyond
// this the oldest is closed (its decode process opens another on its next pull).
constexpr size_t kMaxAcceptedLinks = 64;
constexpr size_t kMaxLinkNameBytes = 128;
// How long pulls from a source whose link could not be opened are declined at once.
constexpr std::chrono::seconds kUnreachableFor{5};

// "<pid>-<random>": unique among processes, also across containers (where pids repeat).
std::string make_name_prefix() {
  std::random_device entropy;
  const uint64_t random = (uint64_t{entropy()} << 32) | entropy();
  return fmt::format("{}-{:016x}", ::getpid(), random);
}

// The decode process's KvLinks a link name belongs to (its name without the last "-<n>").
std::string instance_of(const std::string& name) {
  const size_t dash = name.rfind('-');
  return dash == std::string::npos ? name : name.substr(0, dash);
}

}  // namespace

struct KvLinks::Source {
  std::string address;
  std::deque<std::shared_ptr<KvPull>> queue;  // guarded by KvLinks::mutex_
  std::thread thread;
  // Until then pulls are declined at once (guarded by KvLinks::mutex_), with this problem.
  std::chrono::steady_clock::time_point unreachable_until{};
  std::string unreachable_problem;
  // The link thread's own:
  std::optional<uint64_t> link;
  std::string link_name;
};

KvLinks::KvLinks(KvHandoff& handoff, std::shared_ptr<KvLinkPeers> peers,
                 const hw_memory_desc& memory)
    : handoff_(handoff),
      peers_(std::move(peers)),
      memory_(memory),
      name_prefix_(make_name_prefix()) {}

KvLinks::~KvLinks() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& [address, source] : sources_) {
    if (source->thread.joinable()) source->thread.join();
    if (source->link) handoff_.peer_close(*source->link);
  }
  close_accepted();
}

void KvLinks::close_accepted() {
  std::vector<uint64_t> links;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, accepted] : accepted_) {
      if (accepted.link != 0) links.push_back(accepted.link);
    }
    accepted_.clear();
  }
  for (uint64_t link : links) handoff_.peer_close(link);
}

std::shared_ptr<KvPull> KvLinks::pull(const KvStage& held, const hw_memory_desc& memory,
                                      std::vector<uint32_t> blocks) {
  auto pull = std::make_shared<KvPull>();
  pull->held = held;
  pull->memory = memory;
  pull->blocks = std::move(blocks);
  enqueue(pull);
  return pull;
}

void KvLinks::drop(const KvStage& held) {
  if (peers_ == nullptr || held.source_address.empty()) return;  // it expires there
  auto dropped = std::make_shared<KvPull>();
  dropped->held = held;
  dropped->drop = true;
  enqueue(std::move(dropped));
}

void KvLinks::enqueue(std::shared_ptr<KvPull> pull) {
  std::lock_guard lock(mutex_);
  if (stopping_ || peers_ == nullptr) {
    pull->problem = "this process pulls no KV over peer links (shutting down, or no peers)";
    pull->state = KvPull::State::kDeclined;
    return;
  }
  std::unique_ptr<Source>& source = sources_[pull->held.source_address];
  if (source != nullptr && std::chrono::steady_clock::now() < source->unreachable_until) {
    pull->problem = source->unreachable_problem;
    pull->state = KvPull::State::kDeclined;
    return;
  }
  if (source == nullptr) {
    source = std::make_unique<Source>();
    source->address = pull->held.source_address;
    Source* raw = source.get();
    source->thread = std::thread([this, raw] { serve(*raw); });
  }
  source->queue.push_back(std::move(pull));
  wake_.notify_all();
}

bool KvLinks::cancel(KvPull& pull) {
  KvPull::State queued = KvPull::State::kQueued;
  return pull.state.compare_exchange_strong(queued, KvPull::State::kCancelled);
}

void KvLinks::wait_settled(const KvPull& pull) {
  while (true) {
    const KvPull::State state = pull.state.load();
    if (state != KvPull::State::kQueued && state != KvPull::State::kRequesting) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void KvLinks::serve(Source& source) {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !source.queue.empty(); });
    if (source.queue.empty()) return;  // stopping, nothing left
    std::shared_ptr<KvPull> next = std::move(source.queue.front());
    source.queue.pop_front();
    KvPull::State queued = KvPull::State::kQueued;
    if (!next->state.compare_exchange_strong(queued, KvPull::State::kRequesting)) continue;
    if (stopping_) {
      next->problem = "the process is shutting down";
      next->state = KvPull::State::kDeclined;
      continue;
    }
    lock.unlock();
    pull_one(source, *next);
    lock.lock();
  }
}

void KvLinks::pull_one(Source& source, KvPull& pull) {
  if (pull.drop) {  // posts nothing: whatever fails, the link is as it was
    try {
      peers_->send_held(source.address, source.link_name, pull.held, true);
    } catch (const std::exception& e) {  // it expires there
      spdlog::debug("dropping held KV \"{}\" at {}: {}", pull.held.shm_name, source.address,
                    e.what());
      // A holder that did not answer: the pulls queued behind are declined now, not one by one.
      if (dynamic_cast<const PeerNotAnswering*>(&e) != nullptr) mark_unreachable(source, e.what());
    }
    pull.state = KvPull::State::kDeclined;  // nothing to receive
    return;
  }
  uint64_t link = 0;
  try {
    link = link_to(source, pull.memory);
  } catch (const std::exception& e) {
    pull.problem = fmt::format("no KV link to {}: {}", source.address, e.what());
    spdlog::warn("pulling held KV \"{}\": {}", pull.held.shm_name, pull.problem);
    pull.state = KvPull::State::kDeclined;
    mark_unreachable(source, pull.problem);
    return;
  }
  bool sent = false;  // the holder posted its send: a receive must match it, or the link goes
  try {
    peers_->send_held(source.address, source.link_name, pull.held, false);
    sent = true;
    pull.transfer = handoff_.peer_post(link, HW_PEER_RECEIVE, pull.memory, pull.blocks);
    pull.state = KvPull::State::kPosted;
  } catch (const std::exception& e) {
    pull.problem = e.what();
    const auto* refused = dynamic_cast<const ServiceError*>(&e);
    // Refused for this request alone (its KV expired, another layout: kNotFound,
    // kInvalidArgument): the link stays. Otherwise (the link or the process failed, or a send
    // was posted that no receive matches) the next pull opens another link.
    const bool link_ok =
        !sent && refused != nullptr &&
        (refused->code() == ErrorCode::kNotFound || refused->code() == ErrorCode::kInvalidArgument);
    if (!link_ok && source.link) {
      handoff_.peer_close(*source.link);
      source.link.reset();
    }
    spdlog::warn("pulling held KV \"{}\" from {}: {}", pull.held.shm_name, source.address,
                 pull.problem);
    pull.state = KvPull::State::kDeclined;
    // The holder did not answer in time (frozen, cut off): the pulls queued behind this one are
    // declined now, not each after a timeout of its own (and a new link's, longer still).
    if (dynamic_cast<const PeerNotAnswering*>(&e) != nullptr)
      mark_unreachable(source, pull.problem);
  }
}

void KvLinks::mark_unreachable(Source& source, const std::string& problem) {
  std::lock_guard lock(mutex_);
  source.unreachable_until = std::chrono::steady_clock::now() + kUnreachableFor;
  source.unreachable_problem = problem;
  for (std::shared_ptr<KvPull>& queued : source.queue) {
    KvPull::State expected = KvPull::State::kQueued;  // (a cancelled one stays cancelled)
    queued->problem = problem;
    queued->state.compare_exchange_strong(expected, KvPull::State::kDeclined);
  }
  source.queue.clear();
}

uint64_t KvLinks::link_to(Source& source, const hw_memory_desc& memory) {
  if (source.link) {
    const int32_t state = handoff_.peer_state(*source.link);
    if (state == HW_TRANSFER_DONE) return *source.link;
    handoff_.peer_close(*source.link);  // it failed (a transfer on it, or its join)
    source.link.reset();
  }
  std::string name;
  {
    std::lock_guard lock(mutex_);
    name = fmt::format("{}-{}", name_prefix_, next_link_++);
  }
  const std::vector<uint8_t> rendezvous = handoff_.peer_rendezvous();
  const uint64_t link = handoff_.peer_join(rendezvous, 1, memory);
  try {
    peers_->open_link(source.address, name, rendezvous);
    wait_up(link, name);
  } catch (...) {
    handoff_.peer_close(link);
    throw;
  }
  source.link = link;
  source.link_name = name;
  return link;
}

void KvLinks::wait_up(uint64_t link, const std::string& name) {
  const auto deadline = std::chrono::steady_clock::now() + kLinkUpTimeout;
  while (true) {
    const int32_t state = handoff_.peer_state(link);
    if (state == HW_TRANSFER_DONE) return;
    if (state == HW_TRANSFER_FAILED) {
      throw ServiceError(
          ErrorCode::kUnavailable,
          fmt::format("KV link \"{}\" failed to come up ({})", name, handoff_.transport_name()));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw ServiceError(
          ErrorCode::kUnavailable,
          fmt::format("KV link \"{}\" did not come up within {} s", name, kLinkUpTimeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void KvLinks::accept(const std::string& name, const std::vector<uint8_t>& rendezvous) {
  if (name.empty() || name.size() > kMaxLinkNameBytes) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("a KV link name has 1 to {} bytes", kMaxLinkNameBytes),
                       "link_name");
  }
  if (rendezvous.empty() || rendezvous.size() > HW_PEER_ID_MAX) {
    throw ServiceError(
        ErrorCode::kInvalidArgument,
        fmt::format("a rendezvous id has 1 to {} bytes, not {}", HW_PEER_ID_MAX, rendezvous.size()),
        "rendezvous");
  }
  std::vector<uint64_t> closing;
  {
    std::lock_guard lock(mutex_);
    if (accepted_.count(name) != 0) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("KV link \"{}\" exists already", name), "link_name");
    }
    // The same decode process opens another link only when it gave up its last one here.
    const std::string instance = instance_of(name);
    for (auto it = accepted_.begin(); it != accepted_.end();) {
      if (it->second.link != 0 && instance_of(it->first) == instance) {
        closing.push_back(it->second.link);
        it = accepted_.erase(it);
      } else {
        ++it;
      }
    }
    // Past the bound, the least recently used link goes.
    while (accepted_.size() >= kMaxAcceptedLinks) {
      auto oldest = accepted_.end();
      for (auto it = accepted_.begin(); it != accepted_.end(); ++it) {
        if (it->second.link == 0) continue;  // being joined
        if (oldest == accepted_.end() || it->second.last_used < oldest->second.last_used) {
          oldest = it;
        }
      }
      if (oldest == accepted_.end()) {
        throw ServiceError(
            ErrorCode::kResourceExhausted,
            fmt::format("{} KV links are being joined here already", accepted_.size()));
      }
      closing.push_back(oldest->second.link);
      accepted_.erase(oldest);
    }
    accepted_[name] = Accepted{0, ++use_counter_};  // the name is taken while it is joined
  }
  for (uint64_t link : closing) handoff_.peer_close(link);
  uint64_t link = 0;
  try {
    link = handoff_.peer_join(rendezvous, 0, memory_);
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    accepted_.erase(name);
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("joining KV link \"{}\": {}", name, e.what()));
  }
  std::lock_guard lock(mutex_);
  auto it = accepted_.find(name);
  if (it == accepted_.end()) {  // closed meanwhile (shutting down)
    handoff_.peer_close(link);
    return;
  }
  it->second.link = link;
}

void KvLinks::send(HeldKv& held_kv, const std::string& name, const KvStage& held, bool drop) {
  check_held_kv_name(held.shm_name);
  if (drop) {
    held_kv.send(0, held, true);
    return;
  }
  if (name.size() > kMaxLinkNameBytes) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("a KV link name has 1 to {} bytes", kMaxLinkNameBytes),
                       "link_name");
  }
  uint64_t link = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = accepted_.find(name);
    if (it == accepted_.end() || it->second.link == 0) {
      throw ServiceError(ErrorCode::kUnavailable,
                         fmt::format("no KV link named \"{}\" (never opened here, or closed); "
                                     "open another",
                                     name),
                         "link_name");
    }
    link = it->second.link;
    it->second.last_used = ++use_counter_;
  }
  try {
    wait_up(link, name);
  } catch (const ServiceError& e) {
    {
      std::lock_guard lock(mutex_);
      accepted_.erase(name);
    }
    handoff_.peer_close(link);
    throw ServiceError(ErrorCode::kUnavailable, e.what(), "link_name");
  }
  held_kv.send(link, held, false);
}

}  // namespace headway::serving
