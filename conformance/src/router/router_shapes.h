// Deployment shapes a router is tried on, and random loads over them.
//
// A shape is a list of engines (role, pool). The suite tries every shape; one whose create() the
// router refuses, or on which it places nothing, is NOT_SUPPORTED for that router.
//
// Threading: plain values.
#pragma once

#include <headway/abi.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace headway::conformance {

struct RouterShape {
  std::string name;                     // "single", "mixed", "pools", "disaggregated"
  std::string feature;                  // the feature that declares it ("" for the basic shapes)
  std::vector<hw_engine_load> engines;  // static identity; load fields zero, all alive
  std::vector<std::string> pool_names;  // storage the hw_str pools point into
  bool disaggregated() const { return name == "disaggregated"; }
};

// `pools`: the pool names of the pools shape, in order (two engines each).
std::vector<RouterShape> router_shapes(const std::vector<std::string>& pools);

// Random loads over a shape: about a quarter of the engines dead.
std::vector<hw_engine_load> random_loads(const RouterShape& shape, std::mt19937_64& rng);

hw_route_request random_request(uint64_t id, std::mt19937_64& rng);

}  // namespace headway::conformance
