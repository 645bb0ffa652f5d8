#include "held_kv.h"

#include <fmt/format.h>
#include <headway/serving/echoed_input.h>
#include <headway/serving/generation_service.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "kv_handoff.h"
#include "kv_stage_file.h"

namespace headway::serving {

void HeldKv::hold(uint32_t engine, uint64_t id, const KvStage& stage, const hw_memory_desc& memory,
                  std::vector<uint32_t> blocks) {
  std::lock_guard lock(mutex_);
  Entry& entry = entries_.emplace_back();
  entry.engine = engine;
  entry.id = id;
  entry.stage = stage;
  entry.memory = memory;
  entry.blocks = std::move(blocks);
  entry.expires = Clock::now() + hold_;
}

void check_held_kv_name(const std::string& name) {
  if (!is_kv_stage_name(name)) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("{} is not a held KV's name (they start with {})",
                                   quote_input(name), kKvStagePrefix),
                       "kv_stage.shm_name");
  }
}

void HeldKv::send(uint64_t link, const KvStage& stage, bool drop) {
  check_held_kv_name(stage.shm_name);
  std::lock_guard lock(mutex_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) {
    return e.state == State::kHeld && e.stage.shm_name == stage.shm_name;
  });
  if (it == entries_.end()) {
    throw ServiceError(ErrorCode::kNotFound,
                       fmt::format("no KV is held under {} (never, or its hold time passed, or "
                                   "it was sent or dropped)",
                                   quote_input(stage.shm_name)));
  }
  Entry& entry = *it;
  // From here on the entry is sent or freed, never held again: the decode process either posts
  // the matching receive (OK) or prefills the request itself (an error).
  entry.state = State::kOver;
  if (drop) return;
  if (stage.block_count != entry.stage.block_count ||
      stage.block_bytes != entry.stage.block_bytes ||
      stage.computed_tokens != entry.stage.computed_tokens) {
    throw ServiceError(
        ErrorCode::kInvalidArgument,
        fmt::format("held KV \"{}\" is {} blocks of {} bytes for {} tokens; the request names {} "
                    "blocks of {} bytes for {} tokens",
                    stage.shm_name, entry.stage.block_count, entry.stage.block_bytes,
                    entry.stage.computed_tokens, stage.block_count, stage.block_bytes,
                    stage.computed_tokens));
  }
  try {
    entry.transfer = handoff_.peer_post(link, HW_PEER_SEND, entry.memory, entry.blocks);
  } catch (const std::exception& e) {
    throw ServiceError(ErrorCode::kUnavailable,
                       fmt::format("sending held KV \"{}\": {}", stage.shm_name, e.what()));
  }
  entry.state = State::kSending;
}

void HeldKv::poll(Entry& entry) {
  if (entry.state != State::kSending) return;
  int32_t state = HW_TRANSFER_FAILED;
  try {
    state = handoff_.poll(entry.transfer).state;
  } catch (const std::exception& e) {  // the transport forgot it: it is over either way
    spdlog::error("polling the send of held KV \"{}\": {}", entry.stage.shm_name, e.what());
  }
  if (state == HW_TRANSFER_FAILED) {
    spdlog::warn("the send of held KV \"{}\" (request {}) failed", entry.stage.shm_name, entry.id);
  }
  if (state != HW_TRANSFER_PENDING) entry.state = State::kOver;
}

size_t HeldKv::count() {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t HeldKv::collect(uint32_t engine, std::vector<uint64_t>& release) {
  std::lock_guard lock(mutex_);
  const Clock::time_point now = Clock::now();
  size_t remaining = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& entry = *it;
    if (entry.engine != engine) {
      ++it;
      continue;
    }
    poll(entry);
    if (entry.state == State::kHeld && now >= entry.expires) {
      spdlog::warn("held KV \"{}\" (request {}) was not pulled within its hold time; freed",
                   entry.stage.shm_name, entry.id);
      entry.state = State::kOver;
    }
    if (entry.state == State::kOver) {
      release.push_back(entry.id);
      it = entries_.erase(it);
      continue;
    }
    ++remaining;
    ++it;
  }
  return remaining;
}

void HeldKv::close(uint32_t engine, std::vector<uint64_t>& release) {
  std::unique_lock lock(mutex_);
  for (Entry& entry : entries_) {
    if (entry.engine == engine && entry.state == State::kHeld) entry.state = State::kOver;
  }
  while (true) {
    bool sending = false;
    for (Entry& entry : entries_) {
      if (entry.engine != engine) continue;
      poll(entry);
      sending = sending || entry.state == State::kSending;
    }
    if (!sending) break;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    lock.lock();
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->engine != engine) {
      ++it;
      continue;
    }
    release.push_back(it->id);
    it = entries_.erase(it);
  }
}

}  // namespace headway::serving
