// Whether two models' infos describe the same architecture: the fields a KV cache's shape, a
// request's token ids and a cost file's fit depend on. Used where two model instances must be one
// model (a deployment's engines, a step trace's engines, a twin against its trace).
//
// Threading: a pure function.
#pragma once

#include <headway/abi.h>

#include <cstdint>
#include <optional>

namespace headway::core {

struct ArchitectureDifference {
  const char* field;  // "layers", "hidden", "heads", "kv_heads", "head_dim" or "vocab"
  uint64_t a;
  uint64_t b;
};

// The first of layers, hidden, heads, kv_heads, head_dim and vocab that differs; none when all
// agree. (kv_bytes_per_token is not among them: it follows the KV's element type too, which the
// architecture does not say; callers that move or price KV compare it themselves.)
inline std::optional<ArchitectureDifference> architecture_difference(const hw_model_info& a,
                                                                     const hw_model_info& b) {
  const ArchitectureDifference fields[] = {
      {"layers", a.layers, b.layers},       {"hidden", a.hidden, b.hidden},
      {"heads", a.heads, b.heads},          {"kv_heads", a.kv_heads, b.kv_heads},
      {"head_dim", a.head_dim, b.head_dim}, {"vocab", a.vocab, b.vocab}};
  for (const ArchitectureDifference& d : fields) {
    if (d.a != d.b) return d;
  }
  return std::nullopt;
}

}  // namespace headway::core
