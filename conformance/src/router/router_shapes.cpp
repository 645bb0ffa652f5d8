#include "router_shapes.h"

namespace headway::conformance {
namespace {

hw_engine_load engine(uint32_t index, int32_t role) {
  hw_engine_load e{};
  e.engine_index = index;
  e.role = role;
  e.pool = hw_str{"", 0};
  e.alive = 1;
  e.block_size = 16;
  e.kv_blocks_total = 4096;
  e.kv_blocks_free = 4096;
  return e;
}

}  // namespace

std::vector<RouterShape> router_shapes(const std::vector<std::string>& pools) {
  std::vector<RouterShape> shapes(4);
  shapes[0].name = "single";
  shapes[0].engines = {engine(0, HW_ENGINE_ROLE_MIXED)};
  shapes[1].name = "mixed";
  for (uint32_t i = 0; i < 4; ++i) shapes[1].engines.push_back(engine(i, HW_ENGINE_ROLE_MIXED));
  shapes[2].name = "pools";
  shapes[2].feature = "pools";
  shapes[2].pool_names = pools;
  shapes[3].name = "disaggregated";
  shapes[3].feature = "disaggregation";
  for (uint32_t i = 0; i < 4; ++i) {
    shapes[3].engines.push_back(engine(i, i < 2 ? HW_ENGINE_ROLE_PREFILL : HW_ENGINE_ROLE_DECODE));
  }
  // Pointers into pool_names are taken once the vector of shapes no longer moves.
  RouterShape& pooled = shapes[2];
  for (uint32_t i = 0; i < 2 * pooled.pool_names.size(); ++i) {
    hw_engine_load e = engine(i, HW_ENGINE_ROLE_MIXED);
    const std::string& pool = pooled.pool_names[i / 2];
    e.pool = hw_str{pool.data(), pool.size()};
    pooled.engines.push_back(e);
  }
  return shapes;
}

std::vector<hw_engine_load> random_loads(const RouterShape& shape, std::mt19937_64& rng) {
  std::vector<hw_engine_load> loads = shape.engines;
  std::uniform_int_distribution<uint32_t> small(0, 64);
  for (hw_engine_load& e : loads) {
    e.alive = std::uniform_int_distribution<int>(0, 3)(rng) != 0;
    e.running = small(rng);
    e.waiting = small(rng);
    e.queued_prefill_tokens = std::uniform_int_distribution<uint64_t>(0, 200000)(rng);
    e.outstanding_tokens = e.queued_prefill_tokens + uint64_t{small(rng)} * 100;
    e.kv_blocks_free = std::uniform_int_distribution<uint32_t>(0, e.kv_blocks_total)(rng);
  }
  return loads;
}

hw_route_request random_request(uint64_t id, std::mt19937_64& rng) {
  hw_route_request r{};
  r.id = id;
  // Log-uniform-ish prompts: mostly short, some very long.
  const uint32_t scale = std::uniform_int_distribution<uint32_t>(0, 14)(rng);
  r.prompt_tokens = 1 + std::uniform_int_distribution<uint32_t>(0, (1u << scale))(rng);
  r.max_output_tokens = std::uniform_int_distribution<uint32_t>(1, 1024)(rng);
  r.request_class = hw_str{"", 0};
  return r;
}

}  // namespace headway::conformance
