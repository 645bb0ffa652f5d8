// A router that keeps metrics through the host services, for their export to /metrics: create()
// counts "created" (before the service can export anything); every route() adds 1 to "routes" and
// sets "last_prompt_tokens", subtracts 1 from "shrinking" (a counter's increment must not be
// negative), and, with `distinct_names`, adds to a counter named after the request's prompt length
// ("prompt_tokens_<n>", one new name per length: the export's bound on names), and to a counter
// whose name is not UTF-8. Every request goes to the first engine.
#include <headway/plugin.hpp>
#include <string>

namespace {

using namespace headway::sdk;

constexpr hw_option_spec kOptions[] = {
    bool_option("distinct_names", false,
                "Also count each request under a name made of its prompt length."),
};

class MetricsRouter final : public Router {
 public:
  MetricsRouter(const Host& host, const Options& options, std::span<const hw_engine_load>)
      : host_(host), distinct_names_(options.get_bool("distinct_names")) {
    host_.counter_add("created", 1.0);
  }

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    host_.counter_add("routes", 1.0);
    host_.gauge_set("last_prompt_tokens", static_cast<double>(request.prompt_tokens));
    host_.counter_add("shrinking", -1.0);
    if (distinct_names_) {
      host_.counter_add("prompt_tokens_" + std::to_string(request.prompt_tokens), 1.0);
      host_.counter_add("\xff\xfe not UTF-8", 1.0);
    }
    return hw_route_decision{sizeof(hw_route_decision), engines[0].engine_index,
                             engines[0].engine_index, 0};
  }

 private:
  Host host_;
  bool distinct_names_;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(MetricsRouter, "org.headway.test.metrics_router", "test_metrics_router",
                      "0.0.1", "Router that keeps counters and gauges", kOptions)
