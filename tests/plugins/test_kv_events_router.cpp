// A router that counts the KV events the host gives it (ABI 1.9), for tests of the path from an
// engine's prefix cache to the router: "kv_events_announced" (calls without events, one per engine
// that reports), "kv_pieces_stored", "kv_pieces_removed", "kv_all_removed", and
// "kv_stored_routed": stored pieces that are pieces of a prompt routed before (route_with_prefix's
// hashes), which tells the events are in the routers' hashes. "kv_events_engine_<i>" counts the
// events of engine i. "believed_tokens_<request id>": the tokens of the request's beginning the
// first engine holds by its events alone (whole pieces, up to the first it does not hold). Every
// request goes to the first engine. Options fail_first_events and fail_first_announcement: its
// first call with events (or without: an announcement) fails (HW_INTERNAL), counting nothing of
// it, for the host's handling of a router that fails there.
#include <headway/plugin.hpp>
#include <string>
#include <unordered_set>

namespace {

using namespace headway::sdk;

constexpr hw_option_spec kOptions[] = {
    bool_option("fail_first_events", false, "Fail the first call that carries events."),
    bool_option("fail_first_announcement", false, "Fail the first call without events."),
};

class KvEventsRouter final : public Router {
 public:
  KvEventsRouter(const Host& host, const Options& options, std::span<const hw_engine_load>)
      : host_(host),
        fail_next_events_(options.get_bool("fail_first_events")),
        fail_next_announcement_(options.get_bool("fail_first_announcement")) {}

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    return route_with_prefix(request, {}, engines);
  }

  hw_route_decision route_with_prefix(const hw_route_request& request, const RoutePrefix& prefix,
                                      std::span<const hw_engine_load> engines) override {
    size_t held = 0;
    while (held < prefix.hashes.size() && held_.count(prefix.hashes[held]) != 0) ++held;
    host_.counter_add("believed_tokens_" + std::to_string(request.id),
                      static_cast<double>(held * prefix.piece_tokens));
    routed_.insert(prefix.hashes.begin(), prefix.hashes.end());
    return hw_route_decision{sizeof(hw_route_decision), engines[0].engine_index,
                             engines[0].engine_index, 0};
  }

  void on_kv_events(uint32_t engine_index, std::span<const hw_kv_event> events) override {
    bool& fail = events.empty() ? fail_next_announcement_ : fail_next_events_;
    if (fail) {
      fail = false;
      throw Error(HW_INTERNAL, "test_kv_events_router fails its first events, as asked");
    }
    if (events.empty()) host_.counter_add("kv_events_announced", 1.0);
    host_.counter_add("kv_events_engine_" + std::to_string(engine_index),
                      static_cast<double>(events.size()));
    for (const hw_kv_event& event : events) {
      switch (event.kind) {
        case HW_KV_EVENT_STORED:
          host_.counter_add("kv_pieces_stored", 1.0);
          if (engine_index == 0) held_.insert(event.piece_hash);
          if (routed_.count(event.piece_hash) != 0) host_.counter_add("kv_stored_routed", 1.0);
          break;
        case HW_KV_EVENT_REMOVED:
          host_.counter_add("kv_pieces_removed", 1.0);
          if (engine_index == 0) held_.erase(event.piece_hash);
          break;
        case HW_KV_EVENT_ALL_REMOVED:
          host_.counter_add("kv_all_removed", 1.0);
          if (engine_index == 0) held_.clear();
          break;
        default:
          break;
      }
    }
  }

 private:
  Host host_;
  bool fail_next_events_;
  bool fail_next_announcement_;
  std::unordered_set<uint64_t> routed_;  // every piece of every prompt routed
  std::unordered_set<uint64_t> held_;    // the first engine's, by its events
};

}  // namespace

HEADWAY_EXPORT_ROUTER(KvEventsRouter, "org.headway.test.kv_events_router", "test_kv_events_router",
                      "0.0.1", "Router that counts the KV events it is given", kOptions)
