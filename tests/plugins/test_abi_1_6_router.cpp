// A router as a plugin built against ABI 1.6 lays it out: the descriptor declares minor 6, its
// table has set_engine_limits, and its hw_engine_limits ends before 1.7's max_model_len. It reads
// the waiting-queue bounds (stepping through the host's array by the host's struct_size, as
// abi.h asks) and places each request on the live mixed engine with the fewest outstanding
// tokens whose queue has room; it knows nothing of lengths. The host must then admit only what
// every engine holds, and not judge its placements by max_model_len; nor call 1.8's
// route_with_prefix, which lies past its table (a trap, below).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <headway/plugin.hpp>
#include <vector>

namespace {

// ABI 1.6's hw_engine_limits.
struct LimitsV1_6 {
  uint32_t struct_size;
  uint32_t engine_index;
  uint32_t max_waiting;
};

class LengthBlindRouter final : public headway::sdk::Router {
 public:
  LengthBlindRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                    std::span<const hw_engine_load>) {}
  hw_route_decision route(const hw_route_request&,
                          std::span<const hw_engine_load> engines) override {
    const auto room = [&](const hw_engine_load& e) {
      return e.engine_index >= max_waiting_.size() || max_waiting_[e.engine_index] == 0 ||
             e.waiting < max_waiting_[e.engine_index];
    };
    const size_t best = headway::sdk::pick_least_loaded(
        engines, cursor_,
        [&](const hw_engine_load& e) {
          return e.alive && e.role == HW_ENGINE_ROLE_MIXED && room(e);
        },
        headway::sdk::outstanding_tokens);
    if (best == engines.size()) throw headway::sdk::Error(HW_UNAVAILABLE, "no live mixed engine");
    const uint32_t engine = engines[best].engine_index;
    return hw_route_decision{sizeof(hw_route_decision), engine, engine, 0};
  }
  void read_limits(const unsigned char* limits, uint32_t count) {
    const size_t stride = count == 0 ? 0 : reinterpret_cast<const LimitsV1_6*>(limits)->struct_size;
    max_waiting_.assign(count, 0);
    for (uint32_t i = 0; i < count; ++i) {
      max_waiting_[i] = reinterpret_cast<const LimitsV1_6*>(limits + i * stride)->max_waiting;
    }
  }

 private:
  std::vector<uint32_t> max_waiting_;
  size_t cursor_ = 0;
};

using Adapter = headway::sdk::RouterAdapter<LengthBlindRouter>;

int32_t set_limits_v1_6(hw_router* router, const hw_engine_limits* limits, uint32_t count,
                        hw_status* status) {
  return headway::sdk::guarded(status, [&] {
    static_cast<LengthBlindRouter*>(Adapter::self(router))
        ->read_limits(reinterpret_cast<const unsigned char*>(limits), count);
  });
}

// ABI 1.6's hw_router_table ends after set_engine_limits. Right after it lies a function where
// 1.8's route_with_prefix would be, which aborts: a host that read past struct_size calls it.
struct TableV1_6 {
  uint32_t struct_size;
  decltype(hw_router_table::create) create;
  decltype(hw_router_table::destroy) destroy;
  decltype(hw_router_table::route) route;
  decltype(hw_router_table::set_engine_limits) set_engine_limits;
};
static_assert(sizeof(TableV1_6) == offsetof(hw_router_table, route_with_prefix));

int32_t read_past_the_table(hw_router*, const hw_route_request*, const hw_route_prefix*,
                            const hw_engine_load*, uint32_t, hw_route_decision*, hw_status*) {
  std::fputs("test_abi_1_6_router: the host called an entry past the table's struct_size\n",
             stderr);
  std::abort();
}

struct TableAndTrap {
  TableV1_6 table;
  decltype(hw_router_table::route_with_prefix) trap;
};
static_assert(offsetof(TableAndTrap, trap) == offsetof(hw_router_table, route_with_prefix));

const TableAndTrap kTable = {{sizeof(TableV1_6), Adapter::table.create, Adapter::table.destroy,
                              Adapter::table.route, &set_limits_v1_6},
                             &read_past_the_table};

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR,
                                          6,
                                          HW_KIND_ROUTER,
                                          headway::sdk::make_str("org.headway.test.abi_1_6"),
                                          headway::sdk::make_str("test_abi_1_6_router"),
                                          headway::sdk::make_str("0.0.1"),
                                          headway::sdk::make_str("A router built for ABI 1.6"),
                                          nullptr,
                                          0,
                                          &kTable.table};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
