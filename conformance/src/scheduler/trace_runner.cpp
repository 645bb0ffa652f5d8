#include "trace_runner.h"

#include <fmt/format.h>
#include <headway/core/engine.h>
#include <headway/core/error.h>
#include <headway/core/plugin_options.h>

#include <algorithm>
#include <deque>
#include <headway/sdk/status.hpp>
#include <string_view>
#include <unordered_map>

namespace headway::conformance {
namespace {

uint32_t blocks_for(uint64_t tokens, uint32_t block_size) {
  return static_cast<uint32_t>((tokens + block_size - 1) / block_size);
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// The runner's copy of the engine's request state, rebuilt from each step's plan and the
// listener's events.
struct Mirror {
  uint32_t prompt = 0;
  uint32_t outputs = 0;
  uint32_t computed = 0;
  bool running = false;
  bool done = false;
  uint32_t free_waits = 0;  // steps at the queue head with room for it, not admitted
  uint32_t left_out = 0;    // plans that passed it over (check_running_progress) since its last
  uint64_t admitted = 0;    // when it last became running: a later admission is younger
  uint32_t total() const { return prompt + outputs; }
};

class Listener final : public core::EngineListener {
 public:
  explicit Listener(std::unordered_map<uint64_t, Mirror>& requests) : requests_(requests) {}
  void on_token(uint64_t id, int32_t, double, const core::SampledLogprobs*) override {
    ++requests_[id].outputs;
  }
  void on_finished(uint64_t id, core::FinishReason reason, double) override {
    Mirror& m = requests_[id];
    // `running` stays as it was: the step that finished it was planned with it running.
    m.done = true;
    (reason == core::FinishReason::kAborted ? aborted : finished)++;
  }
  uint64_t finished = 0;
  uint64_t aborted = 0;

 private:
  std::unordered_map<uint64_t, Mirror>& requests_;
};

std::string scheduler_defaults(const PluginUnderTest& p, const TraceSpec& trace) {
  std::string text;
  auto add = [&](const char* key, uint32_t value) {
    if (value == 0 || !p.has_option(key, HW_OPTION_INT)) return;
    text += fmt::format("{}{} = {}", text.empty() ? "" : ", ", key, value);
  };
  add("max_num_batched_tokens", trace.budget);
  add("max_num_seqs", trace.max_seqs);
  return text;
}

// The limits an instance declares against the max_num_batched_tokens and max_num_seqs it was
// given by the suite (scheduler_defaults) or --options: an operator sizes them for activation
// memory or inter-token latency, and the engine holds plans only to the declared limits. A
// default the plugin filled in is not held to (nobody asked for it), nor 0 (by a common
// convention, "no cap" or "pick one").
void check_limits_against_options(const PluginUnderTest& p, const core::PluginOptions& options,
                                  const hw_scheduler_limits& limits, const TraceSpec& trace,
                                  TraceOutcome& out) {
  for (const hw_option_value& v : options.values()) {
    if (v.type != HW_OPTION_INT || v.int_value == 0) continue;
    const std::string_view key = sdk::view(v.key);
    uint32_t declared = 0;
    bool given = p.user_set(key);
    if (key == "max_num_batched_tokens") {
      declared = limits.max_num_batched_tokens;
      given = given || trace.budget != 0;
    } else if (key == "max_num_seqs") {
      declared = limits.max_num_seqs;
      given = given || trace.max_seqs != 0;
    } else {
      continue;
    }
    if (!given) continue;
    out.limits_checked = true;
    if (declared > v.int_value && out.limits_beyond_options.empty()) {
      out.limits_beyond_options =
          fmt::format("trace {}: option {} = {}, and the instance declares a limit of {}",
                      trace.name, key, v.int_value, declared);
    }
  }
}

class TraceRun {
 public:
  TraceRun(const TraceSpec& trace, core::Engine& engine, TraceOutcome& out,
           const std::function<void()>& before_step)
      : trace_(trace), engine_(engine), out_(out), before_step_(before_step), listener_(requests_) {
    engine_.set_listener(&listener_);
  }

  void run() {
    size_t next = 0;  // next request of the trace to arrive
    size_t next_abort = 0;
    uint64_t step = 0;
    uint32_t idle = 0;
    while (step < kMaxStepsPerTrace) {
      for (; next < trace_.requests.size() && trace_.requests[next].arrival_step <= step; ++next) {
        add(trace_.requests[next]);
      }
      for (; next_abort < trace_.abort_steps.size() && trace_.abort_steps[next_abort] <= step;
           ++next_abort) {
        abort_one();
      }
      complete_transfers();
      start_transfers();
      if (!engine_.has_work()) {
        if (!transferring_.empty()) continue;  // they join the queue at the top of the loop
        if (!moves_waiting_.empty()) {         // an idle engine always has room for one
          out_.unfinished =
              fmt::format("trace {}: an idle engine has no room for request {}'s moved KV",
                          trace_.name, moves_waiting_.front()->id);
          return;
        }
        if (next == trace_.requests.size()) break;
        step = trace_.requests[next].arrival_step;  // idle until the next arrival
        continue;
      }
      const uint32_t free_before = engine_.kv().free();
      if (before_step_) before_step_();
      bool planned;
      try {
        planned = engine_.step();
      } catch (const core::Error& e) {
        // The trace's step counts idle gaps between arrivals; the engine's (in its message) does
        // not, and a plugin author read the two in one line as a contradiction (helper-220).
        out_.invalid_plan = fmt::format(
            "trace {} at trace step {} (which counts the steps between arrivals; the engine's "
            "step below counts only those it ran): {}",
            trace_.name, step, e.what());
        return;
      }
      ++step;
      if (!planned) {
        check_starvation(nullptr, free_before);
        // An empty plan with work queued: no time passes, so only new arrivals can change it.
        if (next < trace_.requests.size()) {
          step = std::max(step, trace_.requests[next].arrival_step);
          continue;
        }
        if (++idle >= 3) {
          out_.unfinished = fmt::format(
              "trace {}: the scheduler plans nothing with {} running and {} waiting (stalled)",
              trace_.name, engine_.running_size(), engine_.waiting_size());
          return;
        }
        continue;
      }
      idle = 0;
      ++out_.steps;
      apply(engine_.last_step(), free_before);
    }
    out_.finished = listener_.finished;
    out_.aborted = listener_.aborted;
    if (step >= kMaxStepsPerTrace) {
      out_.unfinished =
          fmt::format("trace {}: {} requests still queued after {} steps", trace_.name,
                      engine_.running_size() + engine_.waiting_size(), step);
    } else if (listener_.finished + listener_.aborted != trace_.requests.size()) {
      out_.unfinished =
          fmt::format("trace {}: {} of {} requests finished ({} aborted)", trace_.name,
                      listener_.finished, trace_.requests.size(), listener_.aborted);
    }
  }

 private:
  void add(const TraceRequest& r) {
    if (r.moved) {
      moves_waiting_.push_back(&r);
      return;
    }
    core::NewRequest request;
    request.id = r.id;
    request.prompt_tokens = r.prompt_tokens;
    request.prompt = r.tokens;
    request.max_output_tokens = r.max_output_tokens;
    request.arrival = engine_.clock().now();
    engine_.add_request(std::move(request));
    requests_[r.id].prompt = r.prompt_tokens;
    waiting_.push_back(r.id);
  }

  // Moved requests, in arrival order, as a decode engine's driver hands them over: each reserves
  // its blocks when the engine has room (the ones behind wait too), its KV "arrives" (the
  // simulated model needs none) and it joins the head of the waiting queue a loop later, with its
  // prompt computed and its first token generated.
  void start_transfers() {
    while (!moves_waiting_.empty()) {
      const TraceRequest& r = *moves_waiting_.front();
      core::IncomingTransfer in;
      in.id = r.id;
      in.prompt_tokens = r.prompt_tokens;
      in.output_tokens = 1;
      in.computed_tokens = r.prompt_tokens;
      in.max_output_tokens = r.max_output_tokens;
      in.arrival = engine_.clock().now();
      if (!engine_.reserve_incoming(std::move(in))) return;
      Mirror& m = requests_[r.id];
      m.prompt = r.prompt_tokens;
      m.outputs = 1;
      m.computed = r.prompt_tokens;
      transferring_.push_back(r.id);
      moves_waiting_.pop_front();
      ++out_.moved_requests;
    }
  }

  void complete_transfers() {
    for (uint64_t id : transferring_) {
      engine_.complete_transfer(id);
      waiting_.push_front(id);  // as the engine queues it
    }
    transferring_.clear();
  }

  // Aborts a request mid-prefill when there is one (the harder case: it holds blocks and its
  // slices are in flight in the scheduler's view), else a waiting one.
  void abort_one() {
    uint64_t victim = 0;
    bool mid_prefill = false;
    for (const auto& [id, m] : requests_) {
      if (m.running && !m.done && m.computed > 0 && m.computed < m.prompt && m.outputs == 0 &&
          (victim == 0 || !mid_prefill || id < victim)) {
        victim = id;
        mid_prefill = true;
      }
    }
    if (victim == 0 && !waiting_.empty()) victim = waiting_.back();
    if (victim == 0) return;
    if (!engine_.abort(victim)) {
      out_.abort_error =
          fmt::format("trace {}: the engine did not know request {}", trace_.name, victim);
      return;
    }
    out_.aborted_mid_prefill += mid_prefill;
    requests_[victim].running = false;
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), victim), waiting_.end());
  }

  void apply(const core::StepDetail& d, uint32_t free_before) {
    out_.prefix_hit_tokens += d.prefix_hit_tokens;
    uint64_t h = 0;
    uint32_t released = 0;
    for (uint64_t id : d.preempted) {
      Mirror& m = requests_[id];
      released += blocks_for(m.computed, trace_.block_size);
      m.computed = 0;
      m.running = false;
      // As the engine queues it: at the head, after the waiting requests holding moved KV.
      const auto holds_moved_kv = [&](uint64_t w) { return requests_[w].computed > 0; };
      waiting_.insert(std::find_if_not(waiting_.begin(), waiting_.end(), holds_moved_kv), id);
      h = mix(h, id * 31 + 7);
      ++out_.preemptions;
    }
    uint32_t allocated = 0;
    for (const hw_slice& s : d.slices) {
      Mirror& m = requests_[s.request_id];
      allocated += blocks_for(uint64_t{s.start} + s.tokens, trace_.block_size) -
                   blocks_for(s.start, trace_.block_size);
      // A beginning found in the prefix cache: its blocks were free (idle) or held by running
      // requests; counted as taken from the free ones, so the free count is never overstated.
      if (s.start > m.computed) allocated += blocks_for(s.start, trace_.block_size);
      m.computed = s.start + s.tokens;
      if (!m.running) m.admitted = ++admissions_;  // as the engine's running list is ordered
      m.running = true;
      h = mix(mix(mix(h, s.request_id), s.start), s.tokens);
    }
    out_.step_hashes.push_back(h);
    const uint32_t available = free_before + released;
    check_starvation(&d, allocated < available ? available - allocated : 0);
    if (d.preempted.empty())
      check_running_progress(d, allocated < available ? available - allocated : 0);
    for (const hw_slice& s : d.slices) {
      Mirror& m = requests_[s.request_id];
      if (m.done) m.running = false;
    }
    waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                  [&](uint64_t id) {
                                    const Mirror& m = requests_[id];
                                    return m.running || m.done;
                                  }),
                   waiting_.end());
  }

  // A running request (it holds KV, and has a token to compute) passed over: the plan decoded a
  // request admitted after it, and the step left room for its next token too (budget, and KV
  // blocks beyond what the running requests will still claim). Counted per request since it was
  // last planned (other steps neither count nor start the count again), and judged against the
  // number running: a fair rotation under a cap on decodes a step passes each request over fewer
  // times than there are requests; one that never serves its oldest while others run does not.
  // Prefill-only steps (a prefill-first policy) do not count.
  void check_running_progress(const core::StepDetail& d, uint32_t kv_free_after_plan) {
    const hw_scheduler_limits& limits = engine_.scheduler_limits();
    uint64_t used = 0;
    uint64_t youngest_decoded = 0;
    for (const hw_slice& s : d.slices) {
      used += s.tokens;
      Mirror& m = requests_[s.request_id];
      m.left_out = 0;
      if (s.start >= m.prompt) youngest_decoded = std::max(youngest_decoded, m.admitted);
    }
    if (youngest_decoded == 0 || used + 1 > limits.max_num_batched_tokens) return;
    uint64_t reserved = 0;
    uint32_t running = 0;
    for (const auto& [id, m] : requests_) {
      if (m.running && !m.done && m.computed < m.total()) {
        ++running;
        reserved +=
            blocks_for(m.total(), trace_.block_size) - blocks_for(m.computed, trace_.block_size);
      }
    }
    const uint32_t bound = std::max(kStarvationBound, running);
    for (auto& [id, m] : requests_) {
      if (!m.running || m.done || m.computed >= m.total() || m.admitted >= youngest_decoded) {
        continue;
      }
      bool planned = false;
      for (const hw_slice& s : d.slices) planned |= s.request_id == id;
      if (planned) continue;
      const uint32_t need =
          blocks_for(m.computed + 1, trace_.block_size) - blocks_for(m.computed, trace_.block_size);
      if (uint64_t{kv_free_after_plan} < reserved + need) continue;
      if (++m.left_out > bound && out_.running_starvation.empty()) {
        out_.running_starvation = fmt::format(
            "trace {}: running request {} ({} of {} tokens computed) was passed over {} times "
            "since it was last planned ({} running), each time by a plan that decoded a request "
            "admitted after it and left room for its next token (the last: budget {} of {} "
            "used, {} KV blocks free)",
            trace_.name, id, m.computed, m.total(), m.left_out, running, used,
            limits.max_num_batched_tokens, kv_free_after_plan);
      }
    }
  }

  // The head of the waiting queue (as the step saw it) was not admitted although the step left room
  // for the whole of it: budget, a running slot and KV blocks beyond what the running prefills
  // will still claim, in a step that preempted nothing.
  void check_starvation(const core::StepDetail* d, uint32_t kv_free_after_plan) {
    const hw_scheduler_limits& limits = engine_.scheduler_limits();
    uint64_t head = 0;
    for (uint64_t id : waiting_) {
      const Mirror& m = requests_[id];
      if (!m.running && !m.done) {
        head = id;
        break;
      }
    }
    if (head == 0 || (d != nullptr && !d->preempted.empty())) return;
    uint64_t used = 0;
    if (d != nullptr) {
      for (const hw_slice& s : d->slices) used += s.tokens;
    }
    // Requests that finished in this step still count: they held their slot when it was planned.
    uint32_t running = 0;
    uint64_t reserved = 0;
    for (const auto& [id, m] : requests_) {
      if (!m.running) continue;
      ++running;
      if (!m.done && m.computed < m.total()) {
        reserved +=
            blocks_for(m.total(), trace_.block_size) - blocks_for(m.computed, trace_.block_size);
      }
    }
    Mirror& w = requests_[head];
    const uint64_t need_tokens = w.total() - w.computed;
    const bool room =
        used + need_tokens <= limits.max_num_batched_tokens && running + 1 <= limits.max_num_seqs &&
        uint64_t{kv_free_after_plan} >= reserved + blocks_for(w.total(), trace_.block_size);
    if (!room) return;
    ++w.free_waits;
    out_.worst_free_wait = std::max(out_.worst_free_wait, w.free_waits);
    if (w.free_waits > kStarvationBound && out_.starvation.empty()) {
      out_.starvation = fmt::format(
          "trace {}: request {} ({} tokens left) headed the waiting queue for {} steps that had "
          "room for all of it (budget {} of {} used, {} running of {}, {} KV blocks free)",
          trace_.name, head, need_tokens, w.free_waits, used, limits.max_num_batched_tokens,
          running, limits.max_num_seqs, kv_free_after_plan);
    }
  }

  const TraceSpec& trace_;
  core::Engine& engine_;
  TraceOutcome& out_;
  const std::function<void()>& before_step_;
  std::unordered_map<uint64_t, Mirror> requests_;
  std::deque<uint64_t> waiting_;                   // queue order, as the engine keeps it
  std::deque<const TraceRequest*> moves_waiting_;  // moved requests waiting for KV room
  std::vector<uint64_t> transferring_;             // reserved; they join the queue next loop
  Listener listener_;
  uint64_t admissions_ = 0;  // requests that became running, counted
};

}  // namespace

TraceOutcome run_trace(const PluginUnderTest& scheduler, const core::PluginChoice& model,
                       const TraceSpec& trace, const std::function<void()>& before_step) {
  TraceOutcome out;
  core::DeploymentConfig deployment;
  deployment.file = "conformance/" + trace.name;
  deployment.name = "conformance";
  deployment.model = model;
  core::EngineConfig config;
  config.name = "engine0";
  config.block_size = trace.block_size;
  config.kv_blocks = trace.kv_blocks;
  config.max_model_len = trace.max_model_len;
  config.role = trace.decode_engine ? HW_ENGINE_ROLE_DECODE : HW_ENGINE_ROLE_MIXED;
  config.moved_kv_blocks = trace.moved_kv_as_needed ? core::EngineConfig::MovedKvBlocks::kAsNeeded
                                                    : core::EngineConfig::MovedKvBlocks::kAll;
  std::unique_ptr<core::Engine> engine;
  try {
    config.scheduler = scheduler.choice_with(scheduler_defaults(scheduler, trace));
    engine = std::make_unique<core::Engine>(config, deployment);
  } catch (const core::Error& e) {
    out.create_error = fmt::format("trace {}: {}", trace.name, e.what());
    return out;
  }
  out.created = true;
  check_limits_against_options(scheduler, *config.scheduler.options, engine->scheduler_limits(),
                               trace, out);
  TraceRun(trace, *engine, out, before_step).run();
  return out;
}

}  // namespace headway::conformance
