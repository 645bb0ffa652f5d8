// Test support: drives one step-scheduler plugin without an engine. Loads the plugin by path
// through core::PluginRegistry, creates a core::SchedulerInstance from options written as TOML
// text, builds snapshots from plain vectors of hw_request_view and returns each plan as vectors,
// checked by core::PlanValidator.
//
// SchedulerQueues is a minimal model of an engine's queues, enough to run a scheduler over several
// steps: it applies a plan (preemptions, then slices) the way the ABI describes it, with the KV
// blocks counted but not named. It is deliberately independent of core::Engine so that scheduler
// tests do not depend on the engine being right.
//
// Header-only; link tomlplusplus::tomlplusplus. Ownership: the harness owns the instance; the
// plugin library is owned by a process-wide registry and stays loaded. Threading: one thread.
#pragma once

#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plan_validator.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

// hw_slice is a global C struct: its operators live in the global namespace, where ADL (and
// gtest) finds them.
inline bool operator==(const hw_slice& a, const hw_slice& b) {
  return a.request_id == b.request_id && a.start == b.start && a.tokens == b.tokens;
}
inline std::ostream& operator<<(std::ostream& os, const hw_slice& s) {
  return os << "{id " << s.request_id << ", start " << s.start << ", tokens " << s.tokens << "}";
}

namespace headway::test {

inline uint32_t blocks_for(uint64_t tokens, uint32_t block_size) {
  return static_cast<uint32_t>((tokens + block_size - 1) / block_size);
}

// A request nobody has admitted yet: no KV, nothing computed.
inline hw_request_view waiting_request(uint64_t id, uint32_t prompt, uint32_t max_output = 16,
                                       double arrival = 0.0) {
  hw_request_view r{};
  r.id = id;
  r.state = HW_REQUEST_WAITING;
  r.prompt_tokens = prompt;
  r.output_tokens = 0;
  r.total_tokens = prompt;
  r.computed_tokens = 0;
  r.max_output_tokens = max_output;
  r.blocks_held = 0;
  r.arrival_time = arrival;
  return r;
}

// A running request mid-prefill: `computed` of its `prompt` tokens have KV, in as few blocks as
// hold them.
inline hw_request_view prefilling_request(uint64_t id, uint32_t prompt, uint32_t computed,
                                          uint64_t admission_order, uint32_t block_size,
                                          uint32_t max_output = 16) {
  hw_request_view r = waiting_request(id, prompt, max_output);
  r.state = HW_REQUEST_PREFILLING;
  r.computed_tokens = computed;
  r.blocks_held = blocks_for(computed, block_size);
  r.admission_order = admission_order;
  return r;
}

// A running request that has sampled `outputs` (>= 1) tokens: exactly one token left to compute.
inline hw_request_view decoding_request(uint64_t id, uint32_t prompt, uint32_t outputs,
                                        uint64_t admission_order, uint32_t block_size,
                                        uint32_t max_output = 16) {
  hw_request_view r = waiting_request(id, prompt, max_output);
  r.state = HW_REQUEST_DECODING;
  r.output_tokens = outputs;
  r.total_tokens = prompt + outputs;
  r.computed_tokens = r.total_tokens - 1;
  r.blocks_held = blocks_for(r.computed_tokens, block_size);
  r.admission_order = admission_order;
  return r;
}

// A waiting request whose KV was moved here from a prefill engine: its prompt computed, its first
// token sampled there, and blocks held for at least its next step (Engine::reserve_incoming).
inline hw_request_view moved_request(uint64_t id, uint32_t prompt, uint32_t block_size,
                                     uint32_t max_output = 16) {
  hw_request_view r = waiting_request(id, prompt, max_output);
  r.output_tokens = 1;
  r.total_tokens = prompt + 1;
  r.computed_tokens = prompt;
  r.blocks_held = blocks_for(prompt + max_output, block_size);
  return r;
}

// A plain-data copy of one plan.
struct Plan {
  std::vector<hw_slice> slices;
  std::vector<uint64_t> preempted;
  std::optional<std::string> invalid;  // the validator's complaint, if any
};

// The registry every harness loads through: plugins stay loaded for the life of the test process.
inline core::PluginRegistry& harness_registry() {
  static core::PluginRegistry registry;
  return registry;
}

class SchedulerHarness {
 public:
  // `plugin_path`: the .so; `options_toml`: the body of the plugin's options table, e.g.
  // "max_num_batched_tokens = 512\nmax_num_seqs = 4". Throws core::Error like the engine would.
  SchedulerHarness(const std::filesystem::path& plugin_path, std::string_view options_toml,
                   uint32_t block_size = 16, uint32_t kv_blocks_total = 1u << 20,
                   uint32_t max_model_len = 1u << 20)
      : host_("test", &clock_),
        facts_{sizeof(hw_engine_facts), block_size, kv_blocks_total, max_model_len} {
    const core::LoadedPlugin& plugin = harness_registry().load_path(plugin_path);
    toml::table table = toml::parse(options_toml, std::string_view("test"));
    core::PluginChoice choice;
    choice.where = "test";
    choice.plugin = &plugin;
    choice.options = std::make_shared<const core::PluginOptions>(
        core::PluginOptions::from_toml(*plugin.descriptor, &table, "test"));
    scheduler_ = std::make_unique<core::SchedulerInstance>(choice, facts_, host_);
  }

  const hw_scheduler_limits& limits() const { return scheduler_->limits(); }
  const hw_engine_facts& facts() const { return facts_; }
  core::VirtualClock& clock() { return clock_; }

  // Plans one step over the given queues (running in admission order, waiting in queue order).
  Plan schedule(const std::vector<hw_request_view>& running,
                const std::vector<hw_request_view>& waiting, uint32_t kv_blocks_free) {
    const size_t capacity = running.size() + waiting.size();
    slices_.assign(std::max<size_t>(capacity, 1), hw_slice{});
    preempted_.assign(std::max<size_t>(running.size(), 1), 0);
    hw_scheduler_snapshot snapshot{sizeof(hw_scheduler_snapshot),
                                   step_index_++,
                                   clock_.now(),
                                   running.data(),
                                   static_cast<uint32_t>(running.size()),
                                   waiting.data(),
                                   static_cast<uint32_t>(waiting.size()),
                                   kv_blocks_free,
                                   facts_.kv_blocks_total,
                                   facts_.block_size,
                                   facts_.max_model_len};
    hw_scheduler_plan plan{sizeof(hw_scheduler_plan),
                           slices_.data(),
                           static_cast<uint32_t>(capacity),
                           0,
                           preempted_.data(),
                           static_cast<uint32_t>(running.size()),
                           0};
    scheduler_->schedule(snapshot, plan);
    Plan out;
    out.invalid = validator_.validate(snapshot, plan, scheduler_->limits());
    const uint32_t slice_count = std::min<uint32_t>(plan.slice_count, plan.slice_capacity);
    const uint32_t preempted_count =
        std::min<uint32_t>(plan.preempted_count, plan.preempted_capacity);
    out.slices.assign(slices_.begin(), slices_.begin() + slice_count);
    out.preempted.assign(preempted_.begin(), preempted_.begin() + preempted_count);
    return out;
  }

 private:
  core::VirtualClock clock_;
  core::HostServices host_;
  hw_engine_facts facts_;
  std::unique_ptr<core::SchedulerInstance> scheduler_;
  core::PlanValidator validator_;
  std::vector<hw_slice> slices_;
  std::vector<uint64_t> preempted_;
  uint64_t step_index_ = 0;
};

// The queues of one imaginary engine, advanced plan by plan.
struct SchedulerQueues {
  std::vector<hw_request_view> running;  // admission order
  std::vector<hw_request_view> waiting;  // queue order
  std::vector<hw_request_view> finished;
  uint32_t kv_blocks_free = 0;
  uint32_t block_size = 16;
  uint64_t next_admission = 0;

  bool empty() const { return running.empty() && waiting.empty(); }

  // Applies a (valid) plan: preemptions first (their KV freed, back to the head of the waiting
  // queue, recomputed from 0 with their outputs kept), then the slices (admitting waiting requests
  // in plan order); a slice that brings computed up to total samples a token, and a request with
  // max_output_tokens outputs finishes and frees its blocks.
  void apply(const Plan& plan) {
    for (uint64_t id : plan.preempted) {
      auto it = find(running, id);
      hw_request_view r = *it;
      running.erase(it);
      kv_blocks_free += r.blocks_held;
      r.blocks_held = 0;
      r.computed_tokens = 0;
      r.state = HW_REQUEST_WAITING;
      ++r.preemptions;
      waiting.insert(waiting.begin(), r);
    }
    for (const hw_slice& s : plan.slices) {
      hw_request_view* r = nullptr;
      auto wit = find(waiting, s.request_id);
      if (wit != waiting.end()) {
        hw_request_view admitted = *wit;
        waiting.erase(wit);
        admitted.state = HW_REQUEST_PREFILLING;
        admitted.admission_order = next_admission++;
        running.push_back(admitted);
        r = &running.back();
      } else {
        r = &*find(running, s.request_id);
      }
      r->computed_tokens += s.tokens;
      const uint32_t need = blocks_for(r->computed_tokens, block_size);
      if (need > r->blocks_held) {
        kv_blocks_free -= need - r->blocks_held;
        r->blocks_held = need;
      }
      if (r->computed_tokens == r->total_tokens) {
        ++r->output_tokens;
        ++r->total_tokens;
        r->state = HW_REQUEST_DECODING;
      } else {
        r->state = HW_REQUEST_PREFILLING;
      }
    }
    for (auto it = running.begin(); it != running.end();) {
      if (it->output_tokens >= it->max_output_tokens) {
        kv_blocks_free += it->blocks_held;
        it->blocks_held = 0;
        it->state = HW_REQUEST_FINISHED;
        finished.push_back(*it);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  }

 private:
  static std::vector<hw_request_view>::iterator find(std::vector<hw_request_view>& queue,
                                                     uint64_t id) {
    return std::find_if(queue.begin(), queue.end(),
                        [id](const hw_request_view& r) { return r.id == id; });
  }
};

}  // namespace headway::test
