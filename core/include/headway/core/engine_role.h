// An engine role's name as a deployment file writes it (`role = "mixed"`, "prefill", "decode").
// Threading: a pure function.
#pragma once

#include <headway/abi.h>

#include <cstdint>

namespace headway::core {

inline const char* engine_role_name(int32_t role) {
  switch (role) {
    case HW_ENGINE_ROLE_PREFILL:
      return "prefill";
    case HW_ENGINE_ROLE_DECODE:
      return "decode";
    default:
      return "mixed";
  }
}

}  // namespace headway::core
