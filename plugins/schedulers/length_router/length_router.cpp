// Length routing: engine pools for prompt-length ranges (e.g. short prompts on some engines, long
// ones on others, so a long prefill never shares an engine with short requests). Each request goes
// to the least-loaded live engine of the pool its prompt length falls in. A pool with no live
// engine sends its requests to the next pool (then the earlier ones), counted in the
// "router_fallbacks" metric: a request is never dropped while any engine lives. Within a pool,
// engines whose waiting queue is full (max_waiting) come last; a pool whose queues are all full
// refuses (429: the host's answer on a full engine) unless spill_when_full sends the request to
// another pool's engine with room, in the same order, counted in "router_spills" (not in
// "router_fallbacks", which counts pools that are down; both flag the decision as a fallback).
// Engines may hold different lengths (a long pool with a larger max_model_len): a request whose
// prompt + max_tokens its length range's pool cannot hold belongs to the next pool, in the same
// order, that can; counted in "router_moves_to_fit", and not a fallback.
// Within a pool, the least loaded counts the prompt's beginning an engine is believed to hold
// (prefix_aware's rule, cached_token_weight): a long pool's documents and conversations stay where
// their KV is cached instead of being computed again on each engine of the pool.
#include <algorithm>
#include <cstdlib>
#include <headway/plugin.hpp>
#include <string>
#include <vector>

namespace {

using headway::sdk::Error;

constexpr char kDefaultPools[] = "short:0,long:8192";

constexpr hw_option_spec kOptions[] = {
    headway::sdk::string_option(
        "pools", kDefaultPools,
        "Pools in ascending order as name:min_prompt_tokens; a pool takes prompts from its min up "
        "to the next pool's min. Each name must be the pool of at least one engine."),
    headway::sdk::bool_option(
        "spill_when_full", false,
        "When every live engine of a request's pool has a full waiting queue (max_waiting), send "
        "it to another pool's engine with room (longer pools first) instead of refusing it with "
        "a 429. Off by default: a short request spilled onto the long pool waits behind long "
        "prefills, which the pools are there to prevent."),
    headway::sdk::cached_token_weight_option(
        "Within a pool, how many outstanding tokens one token of a prompt's beginning, cached on "
        "an engine, is worth: the engine with the fewest outstanding tokens less this times the "
        "cached tokens wins. 0 = the least loaded, whatever it holds."),
    headway::sdk::tracked_tokens_option(),
    headway::sdk::kv_events_option(),
};

struct Pool {
  std::string name;
  uint64_t min_tokens;
  // Where this pool's round-robin among equally loaded engines goes on. One per pool: a cursor
  // shared by all pools wrapped to engine 0 after each pick in the last pool, so a tie in a pool
  // went to its first engine whenever another pool's request came between.
  size_t cursor = 0;
};

std::vector<Pool> parse_pools(const std::string& text) {
  std::vector<Pool> pools;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    size_t colon = item.find(':');
    char* end = nullptr;
    const std::string number = colon == std::string::npos ? "" : item.substr(colon + 1);
    unsigned long long min = number.empty() ? 0 : std::strtoull(number.c_str(), &end, 10);
    // Digits only: strtoull would also take a sign (and wrap "-5" around).
    const bool digits =
        !number.empty() && number.find_first_not_of("0123456789") == std::string::npos;
    if (colon == std::string::npos || colon == 0 || !digits || *end != '\0') {
      throw Error(HW_INVALID_ARGUMENT, "router 'length': pools entry '" + item +
                                           "' is not name:min_prompt_tokens (in \"" + text + "\")");
    }
    if (!pools.empty() && min <= pools.back().min_tokens) {
      throw Error(HW_INVALID_ARGUMENT,
                  "router 'length': pools must be in ascending order of "
                  "min_prompt_tokens (in \"" +
                      text + "\")");
    }
    const std::string name = item.substr(0, colon);
    // A name twice would send two length ranges to the same engines, which is one pool written
    // wrongly (the engines' `pool` names one of them only).
    for (const Pool& pool : pools) {
      if (pool.name == name) {
        throw Error(HW_INVALID_ARGUMENT,
                    "router 'length': pool '" + name + "' is named twice (in \"" + text + "\")");
      }
    }
    pools.push_back(Pool{name, min});
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (pools.empty()) throw Error(HW_INVALID_ARGUMENT, "router 'length': no pools given");
  if (pools.front().min_tokens != 0) {
    throw Error(HW_INVALID_ARGUMENT,
                "router 'length': the first pool must start at 0 tokens (in \"" + text + "\")");
  }
  return pools;
}

class LengthRouter final : public headway::sdk::Router {
 public:
  LengthRouter(const headway::sdk::Host& host, const headway::sdk::Options& options,
               std::span<const hw_engine_load> engines)
      : host_(host),
        pools_(parse_pools(options.get_string("pools"))),
        spill_when_full_(options.get_bool("spill_when_full")),
        affinity_(headway::sdk::PrefixAffinity::from_options(options)) {
    for (const Pool& pool : pools_) {
      bool found = false;
      for (const hw_engine_load& e : engines)
        found = found || headway::sdk::view(e.pool) == pool.name;
      if (!found) {
        // The host fills in the default, so a deployment that never wrote `pools` has these two;
        // an operator who set every engine's pool = "short" never wrote the 'long' it misses.
        std::string source;
        if (options.get_string("pools") == kDefaultPools) {
          source = std::string(", or the router's pools option: '") + pool.name +
                   "' is one of its default pools \"" + kDefaultPools + "\"";
        }
        throw Error(HW_INVALID_ARGUMENT, "router 'length': pool '" + pool.name +
                                             "' has no engine (set pool = \"" + pool.name +
                                             "\" on an [[engines]] table" + source + ")");
      }
    }
    // Every engine that does not fit is named at once, so that one fix of the deployment file
    // is enough. Each pool is served by mixed engines; a prefill engine there would decode what it
    // should hand on (a pool of prefill and decode engines is not a shape it routes).
    std::string wrong_role;
    std::string unlisted;
    for (const hw_engine_load& e : engines) {
      if (e.role != HW_ENGINE_ROLE_MIXED) {
        wrong_role += (wrong_role.empty() ? "" : ", ") + std::to_string(e.engine_index) +
                      (e.role == HW_ENGINE_ROLE_PREFILL ? " (prefill)" : " (decode)");
      }
      bool known = false;
      for (const Pool& pool : pools_) known = known || headway::sdk::view(e.pool) == pool.name;
      if (!known) {
        unlisted += (unlisted.empty() ? "" : ", ") + std::to_string(e.engine_index) + " (pool '" +
                    std::string(headway::sdk::view(e.pool)) + "')";
      }
    }
    if (!wrong_role.empty()) {
      throw Error(HW_INVALID_ARGUMENT,
                  "router 'length': engines of a role other than mixed: " + wrong_role +
                      "; its pools are of mixed engines (leave role out)");
    }
    if (!unlisted.empty()) {
      throw Error(HW_INVALID_ARGUMENT,
                  "router 'length': engines in a pool that `pools` does not list: " + unlisted);
    }
  }

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    return route_with_prefix(request, {}, engines);
  }

  void on_kv_events(uint32_t engine_index, std::span<const hw_kv_event> events) override {
    affinity_.apply(engine_index, events);
  }

  hw_route_decision route_with_prefix(const hw_route_request& request,
                                      const headway::sdk::RoutePrefix& prefix,
                                      std::span<const hw_engine_load> engines) override {
    affinity_.observe(prefix, engines);
    size_t home = 0;
    while (home + 1 < pools_.size() && request.prompt_tokens >= pools_[home + 1].min_tokens) ++home;
    // The home pool first, then the longer pools, then the shorter ones: `k` steps from home.
    const auto pool_at = [&](size_t k) -> Pool& { return pools_[(home + k) % pools_.size()]; };
    const uint64_t whole = whole_length(request);
    // Engine e of `pool` that holds the request, alive or not.
    const auto holding = [&](const hw_engine_load& e, const Pool& pool) {
      return headway::sdk::view(e.pool) == pool.name && holds(e, whole);
    };
    const auto key = [&](const hw_engine_load& e) {
      return static_cast<double>(e.outstanding_tokens) - affinity_.credit(e);
    };
    const auto pick = [&](Pool& pool, bool with_room) {
      return headway::sdk::pick_least_loaded(
          engines, pool.cursor,
          [&](const hw_engine_load& e) {
            return e.alive && holding(e, pool) && (!with_room || has_room(e));
          },
          key);
    };
    const auto has_engine = [&](const Pool& pool, bool live) {
      return std::any_of(engines.begin(), engines.end(), [&](const hw_engine_load& e) {
        return (e.alive || !live) && holding(e, pool);
      });
    };
    // The request's pool: the first that holds it, its length range's unless that one's
    // max_model_len is too small for it.
    size_t fitting = 0;
    while (fitting < pools_.size() && !has_engine(pool_at(fitting), false)) ++fitting;
    if (fitting == pools_.size()) {
      throw Error(HW_UNAVAILABLE, "router 'length': no engine's max_model_len holds a request of " +
                                      std::to_string(whole) + " tokens (prompt + max_tokens)");
    }
    // The first pool with a live engine that holds it: the request's pool unless it is down.
    size_t serving = fitting;
    while (serving < pools_.size() && !has_engine(pool_at(serving), true)) ++serving;
    if (serving == pools_.size()) {
      throw Error(HW_UNAVAILABLE,
                  "router 'length': no live engine in any pool holds a request of " +
                      std::to_string(whole) + " tokens (prompt + max_tokens)");
    }
    size_t best = pick(pool_at(serving), true);
    size_t k = serving;
    if (best == engines.size() && spill_when_full_) {
      for (size_t other = serving + 1; other < pools_.size() && best == engines.size(); ++other) {
        best = pick(pool_at(other), true);
        k = other;
      }
      if (best != engines.size()) host_.counter_add("router_spills", 1.0);
    }
    // Every queue full: the pool's least loaded engine, where the host refuses it (429, retry);
    // nothing is recorded then, since the engine computes nothing of it.
    const bool refused = best == engines.size();
    if (refused) {
      k = serving;
      best = pick(pool_at(serving), false);
    }
    if (fitting > 0) host_.counter_add("router_moves_to_fit", 1.0);
    if (serving > fitting) host_.counter_add("router_fallbacks", 1.0);
    const uint32_t engine = engines[best].engine_index;
    if (!refused) affinity_.record(engine, prefix);
    return hw_route_decision{sizeof(hw_route_decision), engine, engine, k > fitting ? 1 : 0};
  }

 private:
  headway::sdk::Host host_;
  std::vector<Pool> pools_;
  bool spill_when_full_;
  headway::sdk::PrefixAffinity affinity_;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(
    LengthRouter, "org.headway.router.length", "length", "0.1.0",
    "Engine pools by prompt length; within a pool, least loaded less what it caches", kOptions)
