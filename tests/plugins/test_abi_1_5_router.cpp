// A router as a plugin built against ABI 1.5 lays it out: the descriptor declares minor 5, and its
// table ends where 1.6's set_engine_limits begins (struct_size 32 on x86-64). The host must load
// it, never call the entry it lacks, and route as before. It sends every request to the live
// mixed engine with the fewest outstanding tokens, full queues or not. Right after its table lies a
// function where 1.6's entry would be, which aborts: a host that read past struct_size calls it.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <headway/plugin.hpp>

namespace {

class LimitsBlindRouter final : public headway::sdk::Router {
 public:
  LimitsBlindRouter(const headway::sdk::Host&, const headway::sdk::Options&,
                    std::span<const hw_engine_load>) {}
  hw_route_decision route(const hw_route_request&,
                          std::span<const hw_engine_load> engines) override {
    const size_t best = headway::sdk::pick_least_loaded(
        engines, cursor_,
        [](const hw_engine_load& e) { return e.alive && e.role == HW_ENGINE_ROLE_MIXED; },
        headway::sdk::outstanding_tokens);
    if (best == engines.size()) throw headway::sdk::Error(HW_UNAVAILABLE, "no live mixed engine");
    const uint32_t engine = engines[best].engine_index;
    return hw_route_decision{sizeof(hw_route_decision), engine, engine, 0};
  }

 private:
  size_t cursor_ = 0;
};

using Adapter = headway::sdk::RouterAdapter<LimitsBlindRouter>;

// ABI 1.5's hw_router_table: the same first four members, nothing after them.
struct TableV1_5 {
  uint32_t struct_size;
  decltype(hw_router_table::create) create;
  decltype(hw_router_table::destroy) destroy;
  decltype(hw_router_table::route) route;
};
static_assert(sizeof(TableV1_5) == offsetof(hw_router_table, set_engine_limits));

int32_t read_past_the_table(hw_router*, const hw_engine_limits*, uint32_t, hw_status*) {
  std::fputs("test_abi_1_5_router: the host called an entry past the table's struct_size\n",
             stderr);
  std::abort();
}

struct TableAndTrap {
  TableV1_5 table;
  decltype(hw_router_table::set_engine_limits) trap;
};
static_assert(offsetof(TableAndTrap, trap) == offsetof(hw_router_table, set_engine_limits));

const TableAndTrap kTable = {
    {sizeof(TableV1_5), Adapter::table.create, Adapter::table.destroy, Adapter::table.route},
    &read_past_the_table};

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR,
                                          5,
                                          HW_KIND_ROUTER,
                                          headway::sdk::make_str("org.headway.test.abi_1_5"),
                                          headway::sdk::make_str("test_abi_1_5_router"),
                                          headway::sdk::make_str("0.0.1"),
                                          headway::sdk::make_str("A router built for ABI 1.5"),
                                          nullptr,
                                          0,
                                          &kTable.table};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
