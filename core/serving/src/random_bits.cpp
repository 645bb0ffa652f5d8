#include "headway/serving/random_bits.h"

#include <random>
#include <string>
#include <string_view>

namespace headway::serving {

uint64_t random_u64() {
  // One generator per thread: no lock.
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator();
}

std::string random_request_id(std::string_view prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  for (int word = 0; word < 2; ++word) {
    uint64_t bits = random_u64();
    for (int i = 0; i < 16; ++i, bits >>= 4) id += kHex[bits & 0xf];
  }
  return id;
}

}  // namespace headway::serving
