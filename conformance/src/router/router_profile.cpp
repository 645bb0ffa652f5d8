// router-core: random load vectors (some engines dead) over several deployment shapes; placements
// checked for liveness and roles, replays for determinism. See docs/conformance.md.
#include <fmt/format.h>
#include <headway/conformance/child_process.h>
#include <headway/conformance/suite.h>
#include <headway/conformance/test_recorder.h>
#include <headway/core/clock.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/route_prefix.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <headway/sdk/status.hpp>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "../call_waits.h"
#include "../heap_growth.h"
#include "router_shapes.h"

namespace headway::conformance {
namespace {

constexpr uint32_t kRoutesPerShape = 3000;
// router.per_request_heap: requests routed before the heap is watched, then while it is.
constexpr uint32_t kPerRequestWarmUp = 8000;
constexpr uint32_t kPerRequestRoutes = 8000;

std::string_view role_name(int32_t role) {
  return role == HW_ENGINE_ROLE_PREFILL  ? "prefill"
         : role == HW_ENGINE_ROLE_DECODE ? "decode"
                                         : "mixed";
}

// Pool names of the pools shape: those of the plugin's own `pools` option when it has one in the
// name:min,… form (as `length` does), else "short" and "long".
std::vector<std::string> pool_names(const PluginUnderTest& p) {
  std::vector<std::string> names;
  for (const hw_option_value& v : p.options->values()) {
    if (sdk::view(v.key) != "pools" || v.type != HW_OPTION_STRING) continue;
    std::stringstream in{std::string(sdk::view(v.string_value))};
    std::string item;
    while (std::getline(in, item, ',')) {
      const size_t colon = item.find(':');
      std::string name = item.substr(0, colon);
      while (!name.empty() && name.front() == ' ') name.erase(name.begin());
      if (!name.empty()) names.push_back(name);
    }
  }
  if (names.empty()) names = {"short", "long"};
  return names;
}

struct Placement {
  bool placed = false;
  hw_route_decision decision{};
  int32_t code = HW_OK;
  std::string error;
  bool operator==(const Placement& o) const {
    return placed == o.placed && code == o.code &&
           decision.prefill_engine == o.decision.prefill_engine &&
           decision.decode_engine == o.decision.decode_engine &&
           decision.fallback == o.decision.fallback;
  }
};

// Which documents the prompts of a router that reads how prompts begin (ABI 1.8) begin with: one
// of eight (beginnings it has seen before), or one per request (router.per_request_heap: a router
// that keeps every beginning it is given grows with each request, as one that keeps every request
// does).
enum class Documents { kEight, kOnePerRequest };

// How a request's prompt begins: its document, as long as the prompt's whole pieces (at most 32
// of them), a function of the request alone so that a replay sees the same.
std::vector<uint64_t> prefix_hashes_of(const hw_route_request& request, Documents documents) {
  const uint32_t pieces = std::min(request.prompt_tokens / core::kRoutePrefixPieceTokens, 32u);
  std::vector<int32_t> ids(size_t{pieces} * core::kRoutePrefixPieceTokens);
  const uint64_t document = documents == Documents::kEight ? request.id % 8 : request.id;
  for (size_t k = 0; k < ids.size(); ++k) {
    ids[k] = static_cast<int32_t>((document * 2654435761u + k) & 0x7fffffffu);
  }
  std::vector<uint64_t> hashes;
  core::route_prefix_hashes(ids, hashes);
  return hashes;
}

// For a router that reads KV events (ABI 1.9), what one engine (the request id modulo the engines)
// reports before the request is placed, a function of the request alone: the announcement every
// 50th request, the request's beginning stored, its deepest piece removed every 5th, every piece
// removed (ALL_REMOVED) every 97th, and every 13th an event of a kind no ABI defines, which a
// router skips.
void tell_kv_events(core::RouterInstance& router, const hw_route_request& request,
                    const std::vector<hw_engine_load>& loads, std::span<const uint64_t> hashes) {
  if (loads.empty()) return;
  const auto engine = static_cast<uint32_t>(request.id % loads.size());
  if (request.id % 50 == 0) router.kv_events(engine, {});
  std::vector<hw_kv_event> events;
  for (const uint64_t hash : hashes) events.push_back(hw_kv_event{hash, HW_KV_EVENT_STORED, 0});
  if (request.id % 5 == 0 && !hashes.empty()) {
    events.push_back(hw_kv_event{hashes.back(), HW_KV_EVENT_REMOVED, 0});
  }
  if (request.id % 97 == 0) events.push_back(hw_kv_event{0, HW_KV_EVENT_ALL_REMOVED, 0});
  if (request.id % 13 == 0) events.push_back(hw_kv_event{request.id, 99, 0});
  if (!events.empty()) router.kv_events(engine, events);
}

Placement place(core::RouterInstance& router, const hw_route_request& request,
                const std::vector<hw_engine_load>& loads, Documents documents = Documents::kEight) {
  Placement p;
  try {
    const std::vector<uint64_t> hashes = router.reads_prefixes() || router.reads_kv_events()
                                             ? prefix_hashes_of(request, documents)
                                             : std::vector<uint64_t>{};
    if (router.reads_kv_events()) tell_kv_events(router, request, loads, hashes);
    p.decision = router.route(request, loads,
                              router.reads_prefixes() ? hashes : std::span<const uint64_t>{});
    p.placed = true;
  } catch (const core::RolePlacementError& e) {
    // The host refuses a placement against the engines' roles; judged here as placed, by
    // router.honours_roles, which names the rule it breaks.
    p.decision = e.decision();
    p.placed = true;
  } catch (const core::Error& e) {
    p.code = e.code();
    p.error = e.what();
  }
  return p;
}

// The requests, and the loads they see, that router.deterministic routes on one shape (and that
// --replay router-placements routes again): the same sequence in every process.
struct ShapeRoutes {
  ShapeRoutes(uint64_t seed, const RouterShape& s)
      : rng(seed * 7919 + s.engines.size()), shape(s) {}
  // Draws the next request (ids from 1) and its loads.
  void next() {
    loads = random_loads(shape, rng);
    request = random_request(++count, rng);
  }
  std::mt19937_64 rng;
  const RouterShape& shape;
  std::vector<hw_engine_load> loads;
  hw_route_request request{};
  uint64_t count = 0;
};

// One number per placement, equal for equal placements (operator==), for comparing them with
// another process's: the engines and the fallback flag, or the refusal's code.
uint64_t placement_key(const Placement& p) {
  if (!p.placed) return (uint64_t{1} << 63) | static_cast<uint32_t>(p.code);
  return (uint64_t{p.decision.prefill_engine & 0x3fffffffu} << 33) |
         (uint64_t{p.decision.decode_engine} << 1) | (p.decision.fallback != 0 ? 1u : 0u);
}

// The placements of one shape's kRoutesPerShape requests by its first instance.
struct ShapePlacements {
  std::string shape;
  std::vector<uint64_t> keys;
};

// Compares `json` (what `--replay router-placements` printed) with `here`, the shapes on which
// the two instances of this process placed every request alike: empty when the other process
// placed each request the same way, else the first that differs.
std::string compare_with_other_process(const nlohmann::json& json,
                                       const std::vector<ShapePlacements>& here) try {
  for (const ShapePlacements& mine : here) {
    const nlohmann::json* theirs = nullptr;
    for (const nlohmann::json& shape : json.at("shapes")) {
      if (shape.at("name") == mine.shape) theirs = &shape;
    }
    if (theirs == nullptr || theirs->at("keys").is_null()) {
      return fmt::format("shape {}: the other process's router did not accept it", mine.shape);
    }
    const auto keys = theirs->at("keys").get<std::vector<uint64_t>>();
    size_t k = 0;
    while (k < keys.size() && k < mine.keys.size() && keys[k] == mine.keys[k]) ++k;
    if (k < keys.size() || k < mine.keys.size()) {
      return fmt::format(
          "shape {}: request {} was placed otherwise by another process (this suite run again, "
          "with the same plugin, options, seed, requests and loads), where two instances here "
          "place every request alike: a placement that depends on the process (a seed from "
          "std::random_device, the clock or the pid, or an address) makes simulations of one "
          "deployment differ run to run",
          mine.shape, k + 1);
    }
  }
  return {};
} catch (const nlohmann::json::exception& e) {
  return fmt::format(
      "the other process printed placements of another shape (a suite of another version?): {}",
      e.what());
}

struct Violation {
  bool role = false;  // a role rule (else liveness or a failed call)
  std::string message;
};

// The rules of one placement; returns the broken one, if any.
std::optional<Violation> check(const RouterShape& shape, const std::vector<hw_engine_load>& loads,
                               const Placement& p, bool& required_missing) {
  bool any_mixed = false, any_decode = false;
  for (const hw_engine_load& e : loads) {
    any_mixed |= e.alive && e.role == HW_ENGINE_ROLE_MIXED;
    any_decode |= e.alive && e.role == HW_ENGINE_ROLE_DECODE;
  }
  const bool required = shape.disaggregated() ? any_decode : any_mixed;
  required_missing = false;
  if (!p.placed) {
    if (p.code != HW_UNAVAILABLE) return Violation{false, "route() failed with " + p.error};
    required_missing = required;
    return std::nullopt;
  }
  const hw_route_decision& d = p.decision;
  if (d.prefill_engine >= loads.size() || d.decode_engine >= loads.size()) {
    return Violation{false, fmt::format("placement names engine {}/{} of {}", d.prefill_engine,
                                        d.decode_engine, loads.size())};
  }
  const hw_engine_load& pe = loads[d.prefill_engine];
  const hw_engine_load& de = loads[d.decode_engine];
  if (!pe.alive || !de.alive) {
    return Violation{false, fmt::format("placement on a dead engine (prefill {}, decode {})",
                                        d.prefill_engine, d.decode_engine)};
  }
  if (d.prefill_engine == d.decode_engine) {
    const bool ok = pe.role == HW_ENGINE_ROLE_MIXED ||
                    (shape.disaggregated() && pe.role == HW_ENGINE_ROLE_DECODE);
    if (!ok) {
      return Violation{true, fmt::format("single placement on {}-role engine {}",
                                         role_name(pe.role), d.prefill_engine)};
    }
  } else if (pe.role != HW_ENGINE_ROLE_PREFILL || de.role != HW_ENGINE_ROLE_DECODE) {
    return Violation{true, fmt::format("split placement: prefill on {} engine {}, decode on {} "
                                       "engine {}",
                                       role_name(pe.role), d.prefill_engine, role_name(de.role),
                                       d.decode_engine)};
  }
  return std::nullopt;
}

// On the mixed shape (every engine alive), one engine at a time is loaded far past the others
// (a deep queue, a full KV pool) and 50 requests are routed: a router that sends more than 90% of
// them to it ignores load (it always picks the first engine, say), which is not unsafe but gives
// the worst TTFT it could; a QUALITY_WARNING.
void check_uses_load(const PluginUnderTest& p, const RouterShape& shape, core::HostServices& host,
                     uint64_t seed, TestRecorder& t) {
  constexpr uint32_t kRoutes = 50;
  std::mt19937_64 rng(seed * 15485863 + 5);
  uint32_t worst = 0, worst_engine = 0;
  for (uint32_t loaded = 0; loaded < shape.engines.size(); ++loaded) {
    std::unique_ptr<core::RouterInstance> router;
    try {
      router = std::make_unique<core::RouterInstance>(p.choice(), shape.engines, host);
    } catch (const core::Error& e) {
      t.fail(std::string("create() failed on a shape it accepted before: ") + e.what());
      return;
    }
    std::vector<hw_engine_load> loads = shape.engines;
    hw_engine_load& busy = loads[loaded];
    busy.running = 256;
    busy.waiting = 512;
    busy.queued_prefill_tokens = 2'000'000;
    busy.outstanding_tokens = 2'100'000;
    busy.kv_blocks_free = 0;
    uint32_t on_busy = 0;
    for (uint32_t i = 0; i < kRoutes; ++i) {
      const Placement placement = place(*router, random_request(i + 1, rng), loads);
      on_busy += placement.placed && placement.decision.decode_engine == loaded;
    }
    if (on_busy > worst) {
      worst = on_busy;
      worst_engine = loaded;
    }
  }
  t.metrics() = {{"most_on_the_loaded_engine", worst}, {"routes", kRoutes}};
  const std::string text = fmt::format(
      "at most {} of {} requests went to the one loaded engine (engine {}: 512 waiting, no KV "
      "free) while {} idle engines could take them",
      worst, kRoutes, worst_engine, shape.engines.size() - 1);
  if (worst * 10 > kRoutes * 9) {
    t.warn(text + ": the router ignores load");
  } else {
    t.note(text);
  }
}

// The shape's engines, each running 16 requests with 2 waiting and 500,000 tokens outstanding,
// except `light`, which has 2,000: by far the least loaded, the one a router that uses load picks.
std::vector<hw_engine_load> least_loaded_by_far(const RouterShape& shape, uint32_t light) {
  std::vector<hw_engine_load> loads = shape.engines;
  for (hw_engine_load& e : loads) {
    e.running = 16;
    e.waiting = 2;
    e.queued_prefill_tokens = 400'000;
    e.outstanding_tokens = 500'000;
  }
  loads[light].queued_prefill_tokens = 1'000;
  loads[light].outstanding_tokens = 2'000;
  return loads;
}

// On each supported shape of several engines, with every waiting queue bounded at 8
// (set_engine_limits, ABI 1.6), one engine at a time is the least loaded but has a full queue,
// which the host refuses a request on (429), while every other engine (its pool's or role's
// partner among them) has room: a router that reads the limits and still sends more than 10% of
// 50 requests there gives refusals a deployment could have served; a QUALITY_WARNING. A router
// without set_engine_limits is NOT_SUPPORTED here (it is not told the limits).
void check_queue_room(const PluginUnderTest& p, const std::vector<const RouterShape*>& shapes,
                      core::HostServices& host, uint64_t seed, TestRecorder& t) {
  constexpr uint32_t kRoutes = 50;
  constexpr uint32_t kMaxWaiting = 8;
  std::mt19937_64 rng(seed * 32452843 + 7);
  uint32_t worst = 0, worst_engine = 0;
  const RouterShape* worst_shape = shapes.front();
  for (const RouterShape* shown : shapes) {
    const RouterShape& shape = *shown;
    for (uint32_t full = 0; full < shape.engines.size(); ++full) {
      std::unique_ptr<core::RouterInstance> router;
      try {
        router = std::make_unique<core::RouterInstance>(p.choice(), shape.engines, host);
        if (!router->reads_engine_limits()) {
          t.not_supported(
              "the router has no set_engine_limits (ABI 1.6): it cannot see full waiting queues, "
              "so a deployment with max_waiting refuses (429) what another engine could take");
          return;
        }
        std::vector<hw_engine_limits> limits;
        for (const hw_engine_load& e : shape.engines) {
          limits.push_back(
              hw_engine_limits{sizeof(hw_engine_limits), e.engine_index, kMaxWaiting, 0});
        }
        router->set_engine_limits(limits);
      } catch (const core::Error& e) {
        t.fail(std::string("create() or set_engine_limits() failed on a shape it accepted "
                           "before: ") +
               e.what());
        return;
      }
      std::vector<hw_engine_load> loads = least_loaded_by_far(shape, full);
      loads[full].waiting = kMaxWaiting;
      uint32_t on_full = 0;
      for (uint32_t i = 0; i < kRoutes; ++i) {
        const Placement placement = place(*router, random_request(i + 1, rng), loads);
        on_full += placement.placed && (placement.decision.prefill_engine == full ||
                                        placement.decision.decode_engine == full);
      }
      if (on_full > worst) {
        worst = on_full;
        worst_engine = full;
        worst_shape = shown;
      }
    }
  }
  t.metrics() = {{"most_on_the_full_engine", worst}, {"routes", kRoutes}};
  const std::string text = fmt::format(
      "at most {} of {} requests went to the one engine with a full waiting queue (shape {}, "
      "engine {}, the least loaded otherwise) while the shape's {} other engines had room",
      worst, kRoutes, worst_shape->name, worst_engine, worst_shape->engines.size() - 1);
  if (worst * 10 > kRoutes) {
    t.warn(text + ": the router reads the limits but does not avoid full queues");
  } else {
    t.note(text);
  }
}

// On each supported shape of several engines, one engine at a time holds 1,024 tokens
// (max_model_len, set_engine_limits, ABI 1.7) and is by far the least loaded, the others hold
// 32,768; 50 requests need 1,100 to 8,000 tokens each (prompt + max_tokens). A router told the
// lengths must place none on the short engine, as prefill or as decode engine (an engine admits a
// request only when all of it fits): the host admits up to the largest max_model_len and fails
// such a placement as the server's error (HTTP 500), so one is a FAIL. Refusing
// (HW_UNAVAILABLE) where another engine of the short one's role holds the request is a
// QUALITY_WARNING when more than 10% are. A router built before ABI 1.7 is NOT_SUPPORTED (the
// host then admits only what the smallest engine holds).
void check_model_lengths(const PluginUnderTest& p, const std::vector<const RouterShape*>& shapes,
                         core::HostServices& host, uint64_t seed, TestRecorder& t) {
  constexpr uint32_t kRoutes = 50;
  constexpr uint32_t kShort = 1024;
  constexpr uint32_t kLong = 32768;
  std::mt19937_64 rng(seed * 15485863 + 11);
  uint32_t refused_worst = 0;
  std::string refusal;
  for (const RouterShape* shape : shapes) {
    for (uint32_t short_engine = 0; short_engine < shape->engines.size(); ++short_engine) {
      std::unique_ptr<core::RouterInstance> router;
      std::vector<hw_engine_limits> limits;
      for (const hw_engine_load& e : shape->engines) {
        limits.push_back(hw_engine_limits{sizeof(hw_engine_limits), e.engine_index, 0,
                                          e.engine_index == short_engine ? kShort : kLong});
      }
      try {
        router = std::make_unique<core::RouterInstance>(p.choice(), shape->engines, host, limits);
      } catch (const core::Error& e) {
        t.fail(std::string("create() or set_engine_limits() failed on a shape it accepted "
                           "before: ") +
               e.what());
        return;
      }
      if (!router->reads_model_lengths()) {
        t.not_supported(
            "the router does not read the engines' max_model_len (set_engine_limits, ABI 1.7): a "
            "deployment of engines with different lengths then admits only what the shortest "
            "holds");
        return;
      }
      std::vector<hw_engine_load> loads = least_loaded_by_far(*shape, short_engine);
      // Another engine of the short one's role holds every request: refusing one is needless.
      const bool partner = std::any_of(loads.begin(), loads.end(), [&](const hw_engine_load& e) {
        return e.engine_index != short_engine && e.role == loads[short_engine].role;
      });
      uint32_t refused = 0;
      for (uint32_t i = 0; i < kRoutes; ++i) {
        hw_route_request request = random_request(i + 1, rng);
        request.prompt_tokens = std::uniform_int_distribution<uint32_t>(600, 7000)(rng);
        request.max_output_tokens = std::uniform_int_distribution<uint32_t>(500, 1000)(rng);
        const Placement placement = place(*router, request, loads);
        if (!placement.placed && placement.code != HW_UNAVAILABLE) {
          t.fail(fmt::format("shape {}, engine {} holding {} tokens and the others {}: {}",
                             shape->name, short_engine, kShort, kLong, placement.error));
          return;
        }
        if (!placement.placed && partner) {
          ++refused;
          if (refusal.empty()) refusal = placement.error;
        }
      }
      refused_worst = std::max(refused_worst, refused);
    }
  }
  t.metrics() = {{"most_refused", refused_worst}, {"routes", kRoutes}};
  const std::string text = fmt::format(
      "no request went to an engine whose max_model_len ({}) cannot hold it; at most {} of {} "
      "were refused while another engine of the short one's role held them",
      kShort, refused_worst, kRoutes);
  if (refused_worst * 10 > kRoutes) {
    t.warn(text + ": the router refuses requests a longer engine could take (first: " + refusal +
           ")");
  } else {
    t.note(text);
  }
}

// Text lent to a plugin for one call, at the end of pages of its own: as the call returns the
// pages become unreadable (PROT_NONE), and stay so for the next kKeptUnreadable lendings before
// they are unmapped. A plugin that kept the pointer and reads it in a later call crashes there, in
// any build (the suite reports suite.completed), where a freed heap buffer is seen only under
// AddressSanitizer, and not at all when the memory was reused. Threading: one thread.
class LentText {
 public:
  LentText() = default;
  LentText(const LentText&) = delete;
  LentText& operator=(const LentText&) = delete;
  ~LentText() {
    for (const Mapping& m : dead_) ::munmap(m.base, m.bytes);
  }
  // `text` in fresh pages, ending at their end (a read past it lands in whatever is mapped next),
  // until end_call().
  hw_str lend(const std::string& text) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t bytes = (text.size() + page - 1) / page * page + (text.empty() ? page : 0);
    void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw core::Error("mmap of a lent buffer failed", HW_INTERNAL);
    char* data = static_cast<char*>(base) + bytes - text.size();
    std::copy(text.begin(), text.end(), data);
    live_ = Mapping{base, bytes};
    return hw_str{data, text.size()};
  }
  // The call returned: the text dies.
  void end_call() {
    ::mprotect(live_.base, live_.bytes, PROT_NONE);
    dead_.push_back(live_);
    if (dead_.size() > kKeptUnreadable) {
      ::munmap(dead_.front().base, dead_.front().bytes);
      dead_.pop_front();
    }
  }

 private:
  static constexpr size_t kKeptUnreadable = 64;
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
  };
  Mapping live_;
  std::deque<Mapping> dead_;
};

// Requests carry a class in production (the HTTP and gRPC `request_class`, a workload's class
// names), never in the other tests. abi.h lends the class for the call: each lives in pages of its
// own that become unreadable as route() returns (LentText), so a router that keeps the pointer
// crashes at its next read. Classes are drawn at random, most of 8 characters with changing
// contents ("tenant-3", "tenant-8"), so that a router comparing a kept class with the next by size
// first reads it (four classes of four lengths in turn never did).
void check_request_classes(const PluginUnderTest& p, const std::vector<const RouterShape*>& shapes,
                           core::HostServices& host, uint64_t seed, TestRecorder& t) {
  // The HTTP and gRPC frontends take classes of up to 32 characters.
  const auto draw_class = [](std::mt19937_64& rng) -> std::string {
    switch (rng() % 4) {
      case 0:
        return "chat";
      case 1:
        return fmt::format("a-class-name-of-32-characters-{:02}", rng() % 100);
      default:
        return fmt::format("tenant-{}", rng() % 10);
    }
  };
  constexpr uint32_t kRoutes = 400;
  LentText lent;
  uint64_t placed = 0;
  for (const RouterShape* shape : shapes) {
    std::unique_ptr<core::RouterInstance> router;
    try {
      router = std::make_unique<core::RouterInstance>(p.choice(), shape->engines, host);
    } catch (const core::Error& e) {
      t.fail(fmt::format("shape {}: create() failed on a shape it accepted before: {}", shape->name,
                         e.what()));
      return;
    }
    std::mt19937_64 rng(seed * 104729 + shape->engines.size());
    for (uint32_t i = 0; i < kRoutes; ++i) {
      const std::vector<hw_engine_load> loads = random_loads(*shape, rng);
      hw_route_request request = random_request(i + 1, rng);
      const std::string name = draw_class(rng);
      request.request_class = lent.lend(name);
      const Placement placement = place(*router, request, loads);
      lent.end_call();
      request.request_class = hw_str{};
      bool missing = false;
      std::optional<Violation> broken = check(*shape, loads, placement, missing);
      if (!broken && missing) {
        broken = Violation{false, fmt::format("refused ({}) although a live engine could take it",
                                              placement.error)};
      }
      if (broken) {
        t.fail(fmt::format("shape {}: request {} of class \"{}\": {}", shape->name, request.id,
                           name, broken->message));
        return;  // the first says it
      }
      placed += placement.placed;
    }
  }
  t.note(fmt::format("{} of {} requests with a class placed", placed, kRoutes * shapes.size()));
}

// A probe instance with every engine alive gives each request's home pool; a second instance, fed
// the same requests with that pool down, must place elsewhere and flag the fallback.
void check_pool_fallback(const PluginUnderTest& p, const RouterShape& shape,
                         core::HostServices& host, std::mt19937_64& rng, TestRecorder& t) {
  core::RouterInstance probe(p.choice(), shape.engines, host);
  core::RouterInstance router(p.choice(), shape.engines, host);
  uint32_t checked = 0;
  for (uint32_t i = 0; i < 500; ++i) {
    const hw_route_request request = random_request(100000 + i, rng);
    const Placement home = place(probe, request, shape.engines);
    if (!home.placed) {
      t.fail(fmt::format("request {} refused with every engine alive: {}", request.id, home.error));
      continue;
    }
    const std::string_view pool = sdk::view(shape.engines[home.decision.prefill_engine].pool);
    std::vector<hw_engine_load> loads = shape.engines;
    for (hw_engine_load& e : loads) e.alive = sdk::view(e.pool) != pool;
    const Placement away = place(router, request, loads);
    if (!away.placed) {
      t.fail(fmt::format("request {} refused with pool '{}' down and others alive: {}", request.id,
                         pool, away.error));
    } else if (away.decision.fallback == 0) {
      t.fail(fmt::format("request {} moved out of its pool '{}' without the fallback flag",
                         request.id, pool));
    }
    ++checked;
  }
  t.note(fmt::format("{} requests rerouted with their pool down", checked));
}

}  // namespace

namespace {

// Heap kept per request by one fresh instance on `shape`: kPerRequestWarmUp requests first (a
// bounded cache of fewer requests fills up then), then the growth over kPerRequestRoutes more.
HeapGrowth per_request_growth(const PluginUnderTest& p, const RouterShape& shape,
                              core::HostServices& host, uint64_t seed) {
  core::RouterInstance router(p.choice(), shape.engines, host);
  std::mt19937_64 rng(seed * 104729 + 7);
  const std::vector<hw_engine_load>& loads = shape.engines;  // all alive
  uint64_t next_id = 1'000'000;
  const auto route = [&](uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) {
      (void)place(router, random_request(next_id++, rng), loads, Documents::kOnePerRequest);
    }
  };
  route(kPerRequestWarmUp);
  const HeapWatch watch;
  route(kPerRequestRoutes);
  return watch.stop(kPerRequestRoutes);
}

// router.same_across_processes: routes the requests of every shape again in another process.
void check_other_process(const SuiteContext& context, const std::vector<ShapePlacements>& here,
                         TestRecorder& across) {
  if (here.empty() && !context.suite_executable.empty()) {
    across.skip("no shape on which two instances placed every request alike");
    return;
  }
  const std::optional<nlohmann::json> other = replay_in_other_process(
      context, "router-placements", "route", {{"shapes", here.size()}}, across);
  if (!other) return;
  if (std::string problem = compare_with_other_process(*other, here); !problem.empty()) {
    across.fail(problem);
  } else {
    across.note(
        fmt::format("{} {} placed alike", here.size(), here.size() == 1 ? "shape" : "shapes"));
  }
}

}  // namespace

nlohmann::json router_placement_keys(const SuiteContext& context) {
  const PluginUnderTest& p = context.plugin;
  core::VirtualClock clock;
  core::HostServices host("router", &clock);
  nlohmann::json shapes = nlohmann::json::array();
  for (const RouterShape& shape : router_shapes(pool_names(p))) {
    // As the profile does: two instances, each request to both, the first's placements kept.
    std::unique_ptr<core::RouterInstance> a, b;
    try {
      a = std::make_unique<core::RouterInstance>(p.choice(), shape.engines, host);
      b = std::make_unique<core::RouterInstance>(p.choice(), shape.engines, host);
    } catch (const core::Error&) {
      shapes.push_back({{"name", shape.name}, {"keys", nullptr}});
      continue;
    }
    ShapeRoutes drawn(context.options.seed, shape);
    std::vector<uint64_t> keys;
    for (uint32_t i = 0; i < kRoutesPerShape; ++i) {
      drawn.next();
      keys.push_back(placement_key(place(*a, drawn.request, drawn.loads)));
      (void)place(*b, drawn.request, drawn.loads);
    }
    // The profile's next call on the first instance: every engine down.
    std::vector<hw_engine_load> down = shape.engines;
    for (hw_engine_load& e : down) e.alive = 0;
    (void)place(*a, random_request(kRoutesPerShape + 1, drawn.rng), down);
    shapes.push_back({{"name", shape.name}, {"keys", std::move(keys)}});
  }
  return {{"shapes", std::move(shapes)}};
}

std::vector<TestResult> run_router_profile(const SuiteContext& context) {
  const PluginUnderTest& p = context.plugin;
  TestRecorder create("router.create", "accepts at least one deployment shape");
  TestRecorder live("router.places_on_live_engines",
                    "every request is placed on live engines while one can take it");
  TestRecorder roles("router.honours_roles",
                     "single placements on mixed engines (or local on a decode engine when "
                     "disaggregated), split ones on a prefill and a decode engine");
  TestRecorder same("router.deterministic", "the same requests and loads give the same placements");
  TestRecorder across(
      "router.same_across_processes",
      "another process places the same requests under the same loads as this one does");
  std::vector<ShapePlacements> placed_alike;  // shapes where `a` and `b` agreed on every request
  TestRecorder dead("router.unavailable_when_all_dead",
                    "with every engine down, route() answers HW_UNAVAILABLE");
  std::vector<TestRecorder> shape_tests;
  TestRecorder fallback("router.pools_fallback",
                        "a request whose pool is down goes to another pool, flagged as fallback");
  TestRecorder split("router.disaggregated_placements",
                     "with prefill engines alive, requests are prefilled on one and decoded on "
                     "another");
  if (context.has_feature("pools")) fallback.for_declared_feature();
  if (context.has_feature("disaggregation")) split.for_declared_feature();

  core::VirtualClock clock;
  core::HostServices host("router", &clock);
  const std::vector<RouterShape> shapes = router_shapes(pool_names(p));
  uint32_t supported = 0;
  uint64_t routes = 0;
  HeapGrowth heap;
  const RouterShape* heap_shape = nullptr;  // the shape `heap` was measured on
  // Whether the plugin declares the optional feature a shape needs (its failures then count).
  const auto declared = [&](const RouterShape& shape) {
    return !shape.feature.empty() && context.has_feature(shape.feature);
  };
  // route() of instance a on every shape: the server routes under its lock, so a call that waits
  // holds back every request arriving meanwhile.
  CallWaits waits;
  std::string first_refusal_of_create;  // create()'s first error, for router.create's message
  // route()'s first failure that is no refusal (a code other than HW_UNAVAILABLE, a broken
  // decision), on a shape where nothing was placed: the router's bug, not a shape it declines.
  std::string first_route_failure;
  std::vector<const RouterShape*> supported_shapes;
  for (const RouterShape& shape : shapes) {
    TestRecorder t(
        "router.shape." + shape.name,
        fmt::format("routes on the '{}' shape ({} engines)", shape.name, shape.engines.size()));
    if (declared(shape)) t.for_declared_feature();
    std::unique_ptr<core::RouterInstance> a, b;
    try {
      a = std::make_unique<core::RouterInstance>(p.choice(), shape.engines, host);
      b = std::make_unique<core::RouterInstance>(p.choice(), shape.engines, host);
    } catch (const core::Error& e) {
      if (first_refusal_of_create.empty()) {
        first_refusal_of_create = fmt::format("shape {}: {}", shape.name, e.what());
      }
      if (e.code() == HW_INTERNAL) {
        // What an exception that escaped the plugin's code becomes (the SDK's firewall), or a
        // status code abi.h does not define: a bug, not a refusal.
        t.fail(std::string("create() failed rather than refusing the shape (a router refuses a "
                           "shape it cannot serve with HW_INVALID_ARGUMENT): ") +
               e.what());
      } else if (declared(shape)) {
        t.fail(std::string("create() refused it: ") + e.what() + " (feature '" + shape.feature +
               "' is declared)");
      } else {
        t.not_supported(std::string("create() refused it: ") + e.what());
      }
      if (shape.feature == "pools") fallback.not_supported("the pools shape is not supported");
      if (shape.feature == "disaggregation") {
        split.not_supported("the disaggregated shape is not supported");
      }
      shape_tests.push_back(std::move(t));
      continue;
    }
    ShapeRoutes drawn(context.options.seed, shape);
    std::mt19937_64& rng = drawn.rng;
    uint64_t placed = 0, split_count = 0, split_possible = 0;
    std::string first_refusal;  // why the first request not placed was not (names the rule)
    std::string first_failure;  // the first route() that failed rather than refused
    // Violations count only if the shape turns out supported (the router placed something).
    std::vector<std::pair<TestRecorder*, std::string>> pending;
    ShapePlacements keys{shape.name, {}};
    keys.keys.reserve(kRoutesPerShape);  // before the heap is watched: the suite's own memory
    const HeapWatch heap_watch;
    for (uint32_t i = 0; i < kRoutesPerShape; ++i) {
      drawn.next();
      const std::vector<hw_engine_load>& loads = drawn.loads;
      const hw_route_request& request = drawn.request;
      waits.restart();
      const Placement pa = place(*a, request, loads);
      waits.call_ended();
      const Placement pb = place(*b, request, loads);
      ++routes;
      keys.keys.push_back(placement_key(pa));
      if (!(pa == pb)) {
        pending.emplace_back(&same, fmt::format("shape {}: request {} placed differently by two "
                                                "instances fed the same sequence",
                                                shape.name, request.id));
      }
      bool missing = false;
      if (auto broken = check(shape, loads, pa, missing)) {
        pending.emplace_back(
            broken->role ? &roles : &live,
            fmt::format("shape {}: request {}: {}", shape.name, request.id, broken->message));
      }
      if (missing) {
        pending.emplace_back(&live, fmt::format("shape {}: request {} refused ({}) although a "
                                                "live engine could take it",
                                                shape.name, request.id, pa.error));
      }
      placed += pa.placed;
      if (!pa.placed && first_refusal.empty()) {
        first_refusal = fmt::format("request {}: {}", request.id, pa.error);
      }
      if (!pa.placed && pa.code != HW_UNAVAILABLE && first_failure.empty()) {
        first_failure = fmt::format("request {}: {}", request.id, pa.error);
      }
      if (pa.placed && pa.decision.prefill_engine != pa.decision.decode_engine) ++split_count;
      bool prefill_alive = false;
      for (const hw_engine_load& e : loads) {
        prefill_alive |= e.alive && e.role == HW_ENGINE_ROLE_PREFILL;
      }
      split_possible += pa.placed && prefill_alive;
    }
    if (placed == 0) {
      const std::string why =
          "create() accepted it but no request was placed; the first refused, " + first_refusal;
      if (!first_failure.empty()) {
        // A router declines a shape in create() or refuses a request with HW_UNAVAILABLE; any
        // other answer on every request is broken whether or not the shape is declared.
        t.fail(
            "no request was placed: route() failed rather than refusing (only HW_UNAVAILABLE "
            "refuses a request); the first, " +
            first_failure);
        if (first_route_failure.empty()) {
          first_route_failure = fmt::format("shape {}: {}", shape.name, first_failure);
        }
      } else if (declared(shape)) {
        t.fail(why + " (feature '" + shape.feature + "' is declared)");
      } else {
        t.not_supported(why);
      }
      if (shape.feature == "pools") fallback.not_supported("the pools shape is not supported");
      if (shape.feature == "disaggregation") {
        split.not_supported("the disaggregated shape is not supported");
      }
      shape_tests.push_back(std::move(t));
      continue;
    }
    ++supported;
    supported_shapes.push_back(&shape);
    // The first supported shape without violations: their messages are the suite's own heap.
    if (!heap.known && pending.empty()) {
      heap = heap_watch.stop(uint64_t{2} *
                             kRoutesPerShape);  // two instances, one route each per request
      heap_shape = &shape;
    }
    const bool alike = std::none_of(pending.begin(), pending.end(),
                                    [&](const auto& entry) { return entry.first == &same; });
    if (alike) placed_alike.push_back(std::move(keys));
    for (auto& [recorder, message] : pending) recorder->fail(message);
    t.note(fmt::format("{} of {} requests placed", placed, kRoutesPerShape));
    // All engines down: the one answer is HW_UNAVAILABLE.
    std::vector<hw_engine_load> down = shape.engines;
    for (hw_engine_load& e : down) e.alive = 0;
    const Placement none = place(*a, random_request(kRoutesPerShape + 1, rng), down);
    if (none.placed) {
      dead.fail(fmt::format("shape {}: placed on engine {} with every engine down", shape.name,
                            none.decision.prefill_engine));
    } else if (none.code != HW_UNAVAILABLE) {
      dead.fail(fmt::format("shape {}: answered code {} ({}), not HW_UNAVAILABLE", shape.name,
                            none.code, none.error));
    }
    if (shape.name == "pools") {
      if (!context.has_feature("pools")) {
        fallback.not_supported("feature 'pools' not declared");
      } else {
        check_pool_fallback(p, shape, host, rng, fallback);
      }
    }
    if (shape.disaggregated()) {
      if (!context.has_feature("disaggregation")) {
        split.not_supported("feature 'disaggregation' not declared");
      } else if (split_count == 0 && split_possible > 0) {
        split.fail("no request was split over a prefill and a decode engine");
      } else {
        split.note(fmt::format("{} of {} placements split", split_count, placed));
      }
    }
    shape_tests.push_back(std::move(t));
  }
  if (supported == 0) {
    create.fail(!first_route_failure.empty()
                    ? "no request was placed, and route() failed rather than refusing (only "
                      "HW_UNAVAILABLE refuses a request); the first failure, " +
                          first_route_failure
                    : "the router accepted none of the shapes (single, mixed, pools, "
                      "disaggregated)" +
                          (first_refusal_of_create.empty()
                               ? std::string()
                               : "; create() answered " + first_refusal_of_create));
    for (TestRecorder* t : {&live, &roles, &same, &across, &dead}) t->skip("no supported shape");
  } else {
    create.note(fmt::format("{} of {} shapes supported", supported, shapes.size()));
    live.metrics() = {{"routes", routes}};
    check_other_process(context, placed_alike, across);
  }
  TestRecorder uses_load("router.uses_load",
                         "with one engine loaded far past the others, most requests go elsewhere");
  const auto mixed = std::find_if(supported_shapes.begin(), supported_shapes.end(),
                                  [](const RouterShape* s) { return s->name == "mixed"; });
  if (mixed == supported_shapes.end()) {
    uses_load.not_supported("the mixed shape is not supported");
  } else {
    check_uses_load(p, **mixed, host, context.options.seed, uses_load);
  }
  TestRecorder queue_room(
      "router.avoids_full_queues",
      "told the engines' waiting-queue bounds, requests go to engines whose queue has room");
  std::vector<const RouterShape*> several;  // supported shapes with engines to choose between
  for (const RouterShape* shape : supported_shapes) {
    if (shape->engines.size() > 1) several.push_back(shape);
  }
  if (several.empty()) {
    queue_room.not_supported("no supported shape has more than one engine");
  } else {
    check_queue_room(p, several, host, context.options.seed, queue_room);
  }
  TestRecorder lengths("router.holds_request_lengths",
                       "told the engines' max_model_len, requests go only to engines that hold "
                       "their prompt and max_tokens");
  if (several.empty()) {
    lengths.not_supported("no supported shape has more than one engine");
  } else {
    check_model_lengths(p, several, host, context.options.seed, lengths);
  }
  TestRecorder classes("router.request_classes",
                       "requests with a request_class (a string lent for the call) are placed on "
                       "live engines as those without");
  if (supported == 0) {
    classes.skip("no supported shape");
  } else {
    check_request_classes(p, supported_shapes, host, context.options.seed, classes);
  }
  TestRecorder steady_heap("router.steady_state_heap",
                           "routing keeps no heap memory from request to request");
  if (supported == 0) {
    steady_heap.skip("no supported shape");
  } else if (!heap.known && heap_bytes_in_use()) {
    steady_heap.skip("every supported shape had violations (the other tests say which)");
  } else {
    judge_heap_growth(steady_heap, heap, kPerCallHeapBounds, "route() calls", "call");
  }
  // Every route() call is a request the router sees once and is never told the end of: whatever
  // it keeps per request, it keeps for the server's lifetime (a map entry, some 30 bytes, passes
  // the per-call bound above).
  TestRecorder kept(
      "router.per_request_heap",
      "routing keeps no heap memory per request (a router never hears that one ended)");
  if (supported == 0) {
    kept.skip("no supported shape");
  } else if (heap_shape == nullptr && heap_bytes_in_use()) {
    kept.skip("every supported shape had violations (the other tests say which)");
  } else if (heap_shape == nullptr) {
    kept.skip("this allocator does not report the heap in use");
  } else {
    try {
      judge_heap_growth(kept, per_request_growth(p, *heap_shape, host, context.options.seed),
                        kPerRequestHeapBounds, "requests routed", "request");
    } catch (const core::Error& e) {
      kept.fail(std::string("create() failed on a shape it accepted before: ") + e.what());
    }
  }
  TestRecorder never_waits(
      "router.never_waits",
      "at most 1% of route() calls wait over 1 ms off the CPU (sleep, blocking I/O, a contended "
      "lock): the server routes under its lock");
  if (supported == 0) {
    never_waits.skip("no supported shape");
  } else {
    judge_waits(never_waits, "router", routes, waits.voluntary_switches(),
                waits.calls_waiting_over_1ms(), waits.waited_max_seconds());
  }
  std::vector<TestResult> results;
  for (TestRecorder* t : {&create, &live, &roles, &same, &across, &dead, &classes, &uses_load,
                          &queue_room, &lengths, &never_waits, &steady_heap, &kept}) {
    results.push_back(t->finish());
  }
  for (TestRecorder& t : shape_tests) results.push_back(t.finish());
  results.push_back(fallback.finish());
  results.push_back(split.finish());
  return results;
}

}  // namespace headway::conformance
