// Prefill/decode disaggregation: a request is prefilled on a prefill engine (its first token is
// sampled there), its KV blocks are moved to a decode engine, and it decodes there, so decode
// steps never share a step with a prefill. Conditional disaggregation prefills short prompts (at
// most local_prefill_max_tokens) on the decode engine itself, where moving the KV would cost more
// than it saves. With local_prefill_where_cached, what counts against that threshold is what the
// decode engine would compute: the prompt less the beginning it is believed to hold (the KV moved
// to it, the prompts it prefilled), so that a conversation's next turn is prefilled where its
// earlier turns decoded, with the answers no prefill engine has. With no live prefill engine,
// prompts are prefilled locally (a fallback, counted in "router_fallbacks"). On each side, engines
// whose waiting queue is full (max_waiting) come last: the host refuses a request placed on a full
// prefill engine (or on a full decode engine that prefills it locally) with a 429. Both engines
// must hold the whole request (prompt + max_tokens) within their max_model_len: an engine admits
// no less, prefill-only or not.
// The prefill engine is the one with the fewest prompt tokens queued less cached_token_weight times
// the tokens of the prompt's beginning it is believed to hold (prefix_aware's belief): a document
// or a conversation is prefilled where its KV is cached instead of on each prefill engine in turn.
// With local_prefill_where_cached, the decode engine is the one with the least outstanding work
// less cached_token_weight times what it holds where that keeps the prompt local; a prompt that
// moves anyway goes to the least loaded.
#include <algorithm>
#include <headway/plugin.hpp>
#include <string>

namespace {

using headway::sdk::Error;

constexpr hw_option_spec kOptions[] = {
    headway::sdk::int_option("local_prefill_max_tokens", 0, 0, 1 << 30,
                             "Prompts up to this many tokens are prefilled on the decode engine "
                             "itself (with local_prefill_where_cached, this many tokens that "
                             "engine would compute); 0 = always move the KV from a prefill "
                             "engine."),
    headway::sdk::bool_option(
        "local_prefill_where_cached", false,
        "Count against local_prefill_max_tokens only the tokens of a prompt that the decode "
        "engine would compute: those of its beginning not believed cached there (the KV moved to "
        "it and the prompts it prefilled are). A conversation's next turn then stays where its "
        "earlier turns decoded. The decode engine is chosen by outstanding tokens less "
        "cached_token_weight times the tokens it holds, where that keeps the prompt local. Needs "
        "prefix caching on the decode engines and KV enough to keep what returns."),
    headway::sdk::cached_token_weight_option(
        "How many queued prompt tokens one token of a prompt's beginning, cached on a prefill "
        "engine, is worth when choosing it: the prefill engine with the fewest queued prompt "
        "tokens less this times the cached tokens wins (with local_prefill_where_cached, the same "
        "for outstanding tokens on a decode engine). 0 = the least loaded, whatever it holds."),
    headway::sdk::tracked_tokens_option(),
    headway::sdk::kv_events_option(),
};

class DisaggregatedRouter final : public headway::sdk::Router {
 public:
  DisaggregatedRouter(const headway::sdk::Host& host, const headway::sdk::Options& options,
                      std::span<const hw_engine_load> engines)
      : host_(host),
        local_max_(static_cast<uint64_t>(options.get_int("local_prefill_max_tokens"))),
        where_cached_(options.get_bool("local_prefill_where_cached")),
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

  void on_kv_events(uint32_t engine_index, std::span<const hw_kv_event> events) override {
    affinity_.apply(engine_index, events);
  }

  hw_route_decision route_with_prefix(const hw_route_request& request,
                                      const headway::sdk::RoutePrefix& prefix,
                                      std::span<const hw_engine_load> engines) override {
    // Before any choice, so that a prefill engine seen down is forgotten even while only local
    // prefills are placed.
    affinity_.observe(prefix, engines);
    const uint64_t whole = whole_length(request);
    const auto live_prefill = [&](const hw_engine_load& e) {
      return e.alive && e.role == HW_ENGINE_ROLE_PREFILL && holds(e, whole);
    };
    // Without one, every prompt is prefilled on its decode engine, wherever it is held.
    const bool any_prefill = std::any_of(engines.begin(), engines.end(), live_prefill);
    // Decode side: least outstanding work among live decode engines (less what a beginning held
    // there is worth where it keeps the prompt local), preferring, in this order, room in the
    // waiting queue and for the prompt's KV, room in the queue, room for the KV (the transfer then
    // waits for blocks), and then any.
    const uint64_t need = uint64_t{request.prompt_tokens} + 1;
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
            // In the later passes no engine has room in its queue: none takes a local prefill.
            return headway::sdk::outstanding_tokens(e) -
                   (pass < 2 ? local_credit(request, e, any_prefill) : 0.0);
          });
    }
    if (decode == engines.size()) {
      throw Error(HW_UNAVAILABLE, "no live decode engine holds a request of " +
                                      std::to_string(whole) + " tokens (prompt + max_tokens)");
    }
    const hw_engine_load& decode_load = engines[decode];
    const uint32_t decode_engine = decode_load.engine_index;
    // The host refuses a prompt prefilled on a decode engine whose queue is full (which then holds
    // nothing of it), but takes KV moved there.
    const bool decode_takes_it = has_room(decode_load);

    if (request.prompt_tokens <= local_max_) {
      if (decode_takes_it) record_decode(decode_engine, prefix);
      return hw_route_decision{sizeof(hw_route_decision), decode_engine, decode_engine, 0};
    }
    // Longer, but held there: local only where the decode engine takes it (else it moves, as a
    // long prompt did before local_prefill_where_cached).
    if (where_cached_ && decode_takes_it &&
        computed_there(request, decode_load) <= static_cast<double>(local_max_)) {
      record_decode(decode_engine, prefix);
      host_.counter_add("router_local_prefills_cached", 1.0);
      return hw_route_decision{sizeof(hw_route_decision), decode_engine, decode_engine, 0};
    }
    // Prefill side: the fewest prompt tokens queued less what the engine holds of the prompt, on
    // an engine whose queue has room if one has (all full: the least loaded, where the host
    // refuses it with a 429, and which then computes nothing of it: not recorded).
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
      if (decode_takes_it) record_decode(decode_engine, prefix);
      return hw_route_decision{sizeof(hw_route_decision), decode_engine, decode_engine, 1};
    }
    const uint32_t prefill_engine = engines[prefill].engine_index;
    if (!refused) {
      affinity_.record(prefill_engine, prefix);
      // The decode engine keeps the moved KV in its prefix cache once it arrives there.
      record_decode(decode_engine, prefix);
    }
    return hw_route_decision{sizeof(hw_route_decision), prefill_engine, decode_engine, 0};
  }

 private:
  // Tokens of the prompt a decode engine would compute, were it prefilled there: those of its
  // beginning not believed cached there.
  double computed_there(const hw_route_request& request, const hw_engine_load& e) const {
    return std::max(0.0, static_cast<double>(request.prompt_tokens) - affinity_.matched_tokens(e));
  }
  // What a decode engine's cached beginning is worth against its outstanding work: its credit
  // where it keeps the prompt local (a conversation's next turn goes where its earlier turns are,
  // and every prompt without a live prefill engine), and nothing where the prompt moves anyway,
  // which any decode engine takes as well.
  double local_credit(const hw_route_request& request, const hw_engine_load& e,
                      bool any_prefill) const {
    if (!where_cached_) return 0;
    const bool local = !any_prefill || request.prompt_tokens <= local_max_ ||
                       computed_there(request, e) <= static_cast<double>(local_max_);
    return local ? affinity_.credit(e) : 0;
  }
  // The decode engine will hold the prompt's beginning: its KV moved there, or computed there.
  // Only with local_prefill_where_cached, the one use of that belief. A moved prompt is believed
  // held from its routing, before its KV arrives (pending until the engine's KV events say it
  // stored it, so that an eviction reported meanwhile does not take it away): a prompt with the
  // same beginning routed in between is prefilled there, whole if the KV has not arrived by then
  // (docs/serving.md). Leaving the belief to the events instead (held once arrived) moved every
  // question of such a burst: simulated, that lost more than the whole prefills it saved
  // (docs/performance.md, "KV events").
  void record_decode(uint32_t decode_engine, const headway::sdk::RoutePrefix& prefix) {
    if (where_cached_) affinity_.record(decode_engine, prefix);
  }

  headway::sdk::Host host_;
  uint64_t local_max_;
  bool where_cached_;
  // Of the prefill engines, and of the decode engines with local_prefill_where_cached.
  headway::sdk::PrefixAffinity affinity_;
  size_t decode_cursor_ = 0;
  size_t prefill_cursor_ = 0;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(DisaggregatedRouter, "org.headway.router.disaggregated", "disaggregated",
                      "0.1.0", "Prefill/decode disaggregation, optionally conditional", kOptions)
