// A JSON schema's minimum, maximum, exclusiveMinimum and exclusiveMaximum (numbers, or draft 4's
// booleans beside minimum/maximum) read as a NumberRange, exactly: each bound as the shortest
// decimal that reads back as its double (0.1 is one tenth, not the double nearest it; the JSON
// text itself for up to 15 significant digits, since the parser keeps only the double).
//
// Threading: pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "number_range.h"

namespace headway::serving::guided {

// A bounded number's integer part is held below 2^63 (as a bounded integer is), so a bound of
// 2^63 or more in magnitude on the far side changes nothing. Throws ServiceError
// (kInvalidArgument) naming `path` and the keyword for a bound that is not a number, one with
// more than kMaxBoundFractionDigits fraction digits, and bounds no such number lies between.
inline constexpr size_t kMaxBoundFractionDigits = 64;
NumberRange number_range_of(const nlohmann::ordered_json& schema, const std::string& path);

}  // namespace headway::serving::guided
