// Prefill/decode disaggregation: a request is prefilled on a prefill engine (its first token is
// sampled there), its KV blocks are moved to a decode engine, and it decodes there, so decode
// steps never share a step with a prefill. Conditional disaggregation prefills a prompt on the
// decode engine itself when that engine would compute few of its tokens (at most
// local_prefill_max_tokens), where moving the KV would cost more than it saves: a short prompt, or
// a conversation's next turn whose earlier turns that engine holds (it keeps the KV moved to it and
// the answers it decoded, which no prefill engine has). With no live prefill engine, prompts are
// prefilled locally (a fallback, counted in "router_fallbacks"). On each side, engines whose
// waiting queue is full (max_waiting) come last: the host refuses a request placed on a full
// prefill engine (or on a full decode engine that prefills it locally) with a 429. Both engines
// must hold the whole request (prompt + max_tokens) within their max_model_len: an engine admits
// no less, prefill-only or not.
// The prefill engine is the one with the fewest prompt tokens queued less cached_token_weight times
// the tokens of the prompt's beginning it is believed to hold (prefix_aware's belief): a document
// or a conversation is prefilled where its KV is cached instead of on each prefill engine in turn.
// Under conditional disaggregation the decode engines' beginnings are believed too: the decode
// engine is the one with the least outstanding work less cached_token_weight times what it holds
// where that keeps the prompt local, so that a conversation's later turns go where its earlier
// turns are and are prefilled there; a prompt that moves anyway goes to the least loaded.
#include <algorithm>
#include <headway/plugin.hpp>
#include <string>

namespace {

using headway::sdk::Error;

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("local_prefill_max_tokens", 0, 0, 1 << 30,
                             "A prompt of which the decode engine would compute at most this many "
                             "tokens (those of its beginning not believed cached there; with "
                             "cached_token_weight = 0, all) is prefilled on that engine itself; "
                             "0 = always move the KV from a prefill engine."),
    headway::sdk::cached_token_weight_option(
        "How many queued prompt tokens one token of a prompt's beginning, cached on a prefill "
        "engine, is worth when choosing it: the prefill engine with the fewest queued prompt "
        "tokens less this times the cached tokens wins. With local_prefill_max_tokens > 0, also "
        "how many outstanding tokens one cached on a decode engine is worth. 0 = the least loaded, "
        "whatever it holds."),
    headway::sdk::tracked_tokens_option(),
};

class DisaggregatedRouter final : public headway::sdk::Router {
 public:
  DisaggregatedRouter(const headway::sdk::Host& host, const headway::sdk::Options& options,
                      std::span<const hw_engine_load> engines)
      : host_(host),
        local_max_(static_cast<uint64_t>(options.get_int("local_prefill_max_tokens"))),
        affinity_(headway::sdk::PrefixAffinity::from_options(options)) {
    size_t prefill = 0, decode = 0;
    for (const hw_engine_load& e : engines) {
      prefill += e.role == HW_ENGINE_ROLE_PREFILL;
      decode += e.role == HW_ENGINE_ROLE_DECODE;
    }
    if (decode == 0) {
      throw Error(HW_INVALID_ARGUMENT,
                  "router 'disaggregated' needs engines with role = \"decode\" (and \"prefill\")");
    }
    if (prefill == 0 && local_max_ == 0) {
      throw Error(HW_INVALID_ARGUMENT,
                  "router 'disaggregated' needs engines with role = \"prefill\", or "
                  "local_prefill_max_tokens > 0 to let its decode engines prefill prompts "
                  "themselves (those longer than it as a fallback)");
    }
    // Served, but not all: mixed engines take nothing from it, and an operator who added prefill
    // and decode engines beside them (or left the router out) should hear so.
    std::string idle;
    for (const hw_engine_load& e : engines) {
      if (e.role != HW_ENGINE_ROLE_MIXED) continue;
      idle += (idle.empty() ? "" : ", ") + std::to_string(e.engine_index);
    }
    if (!idle.empty()) {
      host.log(HW_LOG_WARN,
               "router 'disaggregated' places requests on prefill and decode engines only: "
               "engine(s) " +
                   idle +
                   " (mixed) will take none (give them a role, or serve mixed engines under "
                   "least_loaded)");
    }
  }

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    return route_with_prefix(request, {}, engines);
  }

  hw_route_decision route_with_prefix(const hw_route_request& request,
                                      const headway::sdk::RoutePrefix& prefix,
                                      std::span<const hw_engine_load> engines) override {
    // Before any choice, so that a prefill engine seen down is forgotten even while only local
    // prefills are placed.
    affinity_.observe(prefix, engines);
    // Decode side: least outstanding work among live decode engines (less what a beginning held
    // there is worth where it keeps the prompt local), preferring, in this order,
    // room in the waiting queue and for the prompt's KV, room in the queue, room for the KV (the
    // transfer then waits for blocks), and then any.
    const uint64_t need = uint64_t{request.prompt_tokens} + 1;
    const uint64_t whole = whole_length(request);
    const auto kv_fits = [&](const hw_engine_load& e) {
      return static_cast<uint64_t>(e.kv_blocks_free) * e.block_size >= need;
    };
    size_t decode = engines.size();
    for (int pass = 0; pass < 4 && decode == engines.size(); ++pass) {
      decode = headway::sdk::pick_least_loaded(
          engines, decode_cursor_,
          [&](const hw_engine_load& e) {
            return e.alive && e.role == HW_ENGINE_ROLE_DECODE && holds(e, whole) &&
                   (pass % 2 == 1 || kv_fits(e)) && (pass >= 2 || has_room(e));
          },
          [&](const hw_engine_load& e) {
            return headway::sdk::outstanding_tokens(e) - local_prefill_credit(request, e);
          });
    }
    if (decode == engines.size()) {
      throw Error(HW_UNAVAILABLE, "no live decode engine holds a request of " +
                                      std::to_string(whole) + " tokens (prompt + max_tokens)");
    }
    const uint32_t decode_engine = engines[decode].engine_index;
    // The host refuses a prompt prefilled on a decode engine whose queue is full: that engine then
    // holds nothing of it (KV moved to it, it takes).
    const bool decode_takes_it = has_room(engines[decode]);

    if (local_max_ > 0) {
      if (computed_there(request, engines[decode]) <= static_cast<double>(local_max_)) {
        if (decode_takes_it) {
          affinity_.record(decode_engine, prefix);
          // Local only for what it holds: how often the cache keeps a prompt from moving.
          if (request.prompt_tokens > local_max_) {
            host_.counter_add("router_local_prefills_cached", 1.0);
          }
        }
        return hw_route_decision{sizeof(hw_route_decision), decode_engine, decode_engine, 0};
      }
    }
    // Prefill side: the fewest prompt tokens queued less what the engine holds of the prompt, on
    // an engine whose queue has room if one has (all full: the least loaded, where the host
    // refuses it with a 429, and which then computes nothing of it: not recorded).
    const auto live_prefill = [&](const hw_engine_load& e) {
      return e.alive && e.role == HW_ENGINE_ROLE_PREFILL && holds(e, whole);
    };
    const auto queued = [&](const hw_engine_load& e) {
      return static_cast<double>(e.queued_prefill_tokens) - affinity_.credit(e);
    };
    size_t prefill = headway::sdk::pick_least_loaded(
        engines, prefill_cursor_,
        [&](const hw_engine_load& e) { return live_prefill(e) && has_room(e); }, queued);
    const bool refused = prefill == engines.size();
    if (refused) {
      prefill = headway::sdk::pick_least_loaded(engines, prefill_cursor_, live_prefill, queued);
    }
    if (prefill == engines.size()) {
      host_.counter_add("router_fallbacks", 1.0);
      if (local_max_ > 0 && decode_takes_it) affinity_.record(decode_engine, prefix);
      return hw_route_decision{sizeof(hw_route_decision), decode_engine, decode_engine, 1};
    }
    const uint32_t prefill_engine = engines[prefill].engine_index;
    if (!refused) {
      affinity_.record(prefill_engine, prefix);
      // The decode engine keeps the moved KV in its cache: a later turn may stay local there.
      if (local_max_ > 0) affinity_.record(decode_engine, prefix);
    }
    return hw_route_decision{sizeof(hw_route_decision), prefill_engine, decode_engine, 0};
  }

 private:
  // Tokens of the prompt a decode engine would compute, were it prefilled there: those of its
  // beginning not believed cached there (with cached_token_weight = 0, all).
  double computed_there(const hw_route_request& request, const hw_engine_load& e) const {
    return std::max(0.0, static_cast<double>(request.prompt_tokens) - affinity_.matched_tokens(e));
  }
  // What a decode engine's cached beginning is worth against its outstanding work: its credit
  // where it keeps the prompt local (a conversation's next turn goes where its earlier turns are),
  // and nothing where the prompt moves anyway, which any decode engine takes as well.
  double local_prefill_credit(const hw_route_request& request, const hw_engine_load& e) const {
    if (local_max_ == 0 || computed_there(request, e) > static_cast<double>(local_max_)) return 0;
    return affinity_.credit(e);
  }

  headway::sdk::Host host_;
  uint64_t local_max_;
  // Of the prefill engines, and of the decode engines under conditional disaggregation.
  headway::sdk::PrefixAffinity affinity_;
  size_t decode_cursor_ = 0;
  size_t prefill_cursor_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(DisaggregatedRouter, "org.headway.router.disaggregated", "disaggregated",
                      "0.1.0", "Prefill/decode disaggregation, optionally conditional", kOptions)
