// Writing a router as a C++ class. Header-only; plugin side.
// Lifetimes: the Host may be kept, by reference or by copy (it lives as long as the instance); the
// Options are valid only during the constructor: read every option there.
// Threading: the cluster calls one instance from one thread at a time, not always the same thread,
// so keep no thread_local state. Instances of one library may run concurrently (one per cluster):
// guard any static state.
#pragma once

#include <headway/abi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <headway/sdk/host.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <span>
#include <type_traits>
#include <vector>

namespace headway::sdk {

// How a request's prompt begins (hw_route_prefix, ABI 1.8): hashes[i] names its first
// (i + 1) * piece_tokens token ids. Empty where the host does not know the ids. Borrowed for the
// call: copy what is kept.
struct RoutePrefix {
  uint32_t piece_tokens = 0;
  std::span<const uint64_t> hashes;
};

class Router {
 public:
  virtual ~Router() = default;
  // Throw Error(HW_UNAVAILABLE, …) when no engine can take the request.
  virtual hw_route_decision route(const hw_route_request& request,
                                  std::span<const hw_engine_load> engines) = 0;
  // A router that reads how prompts begin overrides this one (ABI 1.8): RouterAdapter then gives
  // the host route_with_prefix, and the host calls it instead of route() for every request (and
  // computes the hashes only for such a router). Same rules as route().
  virtual hw_route_decision route_with_prefix(const hw_route_request& request,
                                              const RoutePrefix& prefix,
                                              std::span<const hw_engine_load> engines) {
    (void)prefix;
    return route(request, engines);
  }
  // What engine `engine_index`'s prefix cache stored and evicted since the last call for it (ABI
  // 1.9), oldest first: a router that overrides this gets the entry in its table (RouterAdapter),
  // and the host then has its engines keep the events and calls this before each route(). Never
  // during route(). Borrowed for the call.
  virtual void on_kv_events(uint32_t engine_index, std::span<const hw_kv_event> events) {
    (void)engine_index;
    (void)events;
  }
  // The engines' limits (ABI 1.6), engine i's at index i: after construction and whenever one
  // changes, never during route(). Copies in this build's layout (RouterAdapter reads the host's
  // array by the host's struct size; a field the host's struct lacks is 0). Keeps them for
  // has_room() and holds(); an override that reads more calls this too. A host before ABI 1.6
  // never calls it: every engine then has room; a host before 1.7 sends no max_model_len, and
  // every engine then holds every request (that host admits only what the smallest holds).
  virtual void set_engine_limits(std::span<const hw_engine_limits> limits) {
    max_waiting_.assign(limits.size(), 0);
    max_model_len_.assign(limits.size(), 0);
    for (size_t i = 0; i < limits.size(); ++i) {
      max_waiting_[i] = limits[i].max_waiting;
      max_model_len_[i] = limits[i].max_model_len;
    }
  }

 protected:
  // Whether engine e's waiting queue takes one more request: the host refuses one placed on an
  // engine whose queue is full (HTTP 429), so a router that can choose prefers an engine with
  // room. True where the limit is unbounded or not known.
  bool has_room(const hw_engine_load& e) const {
    return e.engine_index >= max_waiting_.size() || max_waiting_[e.engine_index] == 0 ||
           e.waiting < max_waiting_[e.engine_index];
  }
  // Whether engine e holds a request of `tokens` positions within its max_model_len (ABI 1.7):
  // whole_length(request) on every engine the request is placed on, a prefill engine too (an
  // engine admits a request only when all of it fits). The host admits up to the largest
  // max_model_len of the deployment, so a router places a request only where this holds (the host
  // fails it otherwise). True where the length is not known.
  bool holds(const hw_engine_load& e, uint64_t tokens) const {
    return e.engine_index >= max_model_len_.size() || max_model_len_[e.engine_index] == 0 ||
           tokens <= max_model_len_[e.engine_index];
  }
  // prompt + max_output_tokens: what an engine that decodes the request must hold.
  static uint64_t whole_length(const hw_route_request& request) {
    return uint64_t{request.prompt_tokens} + request.max_output_tokens;
  }

 private:
  std::vector<uint32_t> max_waiting_;    // per engine; 0: unbounded
  std::vector<uint32_t> max_model_len_;  // per engine; 0: not known
};

// T is constructible from (const Host&, const Options&, std::span<const hw_engine_load>).
template <class T>
struct RouterAdapter {
  static constexpr int32_t kind = HW_KIND_ROUTER;
  static Router* self(hw_router* r) { return &reinterpret_cast<WithHost<T>*>(r)->object; }

  static int32_t create(const hw_host_services* host, const hw_options* options,
                        const hw_engine_load* engines, uint32_t count, hw_router** out,
                        hw_status* status) {
    return guarded(status, [&] {
      *out = reinterpret_cast<hw_router*>(
          new WithHost<T>(host, Options(options), std::span(engines, count)));
    });
  }
  static void destroy(hw_router* r) { delete reinterpret_cast<WithHost<T>*>(r); }
  static int32_t route(hw_router* r, const hw_route_request* request, const hw_engine_load* engines,
                       uint32_t count, hw_route_decision* decision, hw_status* status) {
    return guarded(status, [&] {
      *decision = self(r)->route(*request, std::span(engines, count));
      decision->struct_size = sizeof(hw_route_decision);
    });
  }
  static int32_t route_with_prefix(hw_router* r, const hw_route_request* request,
                                   const hw_route_prefix* prefix, const hw_engine_load* engines,
                                   uint32_t count, hw_route_decision* decision, hw_status* status) {
    return guarded(status, [&] {
      RoutePrefix view;
      // Fields past the host's struct_size stay empty (none yet: 1.8 introduced the struct).
      if (prefix != nullptr &&
          prefix->struct_size >= offsetof(hw_route_prefix, count) + sizeof(prefix->count)) {
        view.piece_tokens = prefix->piece_tokens;
        if (prefix->hashes != nullptr) view.hashes = std::span(prefix->hashes, prefix->count);
      }
      *decision = self(r)->route_with_prefix(*request, view, std::span(engines, count));
      decision->struct_size = sizeof(hw_route_decision);
    });
  }
  // Whether T (or a class between it and Router) overrides route_with_prefix: only then is the
  // entry in the table, so that the host hashes prompts only for routers that read the hashes.
  // Where the name cannot be taken as one public member (a private override, an overload set) it
  // cannot tell, and keeps the entry: Router's own forwards to route().
  static constexpr bool reads_prefixes() {
    if constexpr (requires { &T::route_with_prefix; }) {
      return !std::is_same_v<decltype(&T::route_with_prefix),
                             hw_route_decision (Router::*)(const hw_route_request&,
                                                           const RoutePrefix&,
                                                           std::span<const hw_engine_load>)>;
    } else {
      return true;
    }
  }
  static constexpr bool kReadsPrefixes = reads_prefixes();
  static int32_t kv_events(hw_router* r, uint32_t engine_index, const hw_kv_event* events,
                           uint32_t count, hw_status* status) {
    return guarded(status, [&] {
      self(r)->on_kv_events(engine_index, std::span(events, events == nullptr ? 0 : count));
    });
  }
  // Whether T overrides on_kv_events (as reads_prefixes() tells for route_with_prefix): only then
  // do the engines keep events for it.
  static constexpr bool reads_kv_events() {
    if constexpr (requires { &T::on_kv_events; }) {
      return !std::is_same_v<decltype(&T::on_kv_events),
                             void (Router::*)(uint32_t, std::span<const hw_kv_event>)>;
    } else {
      return true;
    }
  }
  static constexpr bool kReadsKvEvents = reads_kv_events();
  // The host's elements are limits[0].struct_size bytes each (abi.h): copied into this build's
  // layout, zero past what the host's struct holds.
  static int32_t set_engine_limits(hw_router* r, const hw_engine_limits* limits, uint32_t count,
                                   hw_status* status) {
    return guarded(status, [&] {
      std::vector<hw_engine_limits> copies(count);
      const size_t stride = count == 0 ? 0 : limits[0].struct_size;
      const auto* bytes = reinterpret_cast<const unsigned char*>(limits);
      for (uint32_t i = 0; i < count; ++i) {
        std::memcpy(&copies[i], bytes + i * stride, std::min(stride, sizeof(hw_engine_limits)));
        copies[i].struct_size = sizeof(hw_engine_limits);
      }
      self(r)->set_engine_limits(copies);
    });
  }
  static constexpr hw_router_table table = {sizeof(hw_router_table),
                                            &create,
                                            &destroy,
                                            &route,
                                            &set_engine_limits,
                                            kReadsPrefixes ? &route_with_prefix : nullptr,
                                            kReadsKvEvents ? &kv_events : nullptr};
};

}  // namespace headway::sdk
