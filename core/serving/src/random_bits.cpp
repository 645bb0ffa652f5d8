#include "headway/serving/random_bits.h"

#include <random>

namespace headway::serving {

uint64_t random_u64() {
  // One generator per thread: no lock.
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator();
}

}  // namespace headway::serving
