// Checks an "Authorization: Bearer <key>" header against the configured API key in time that does
// not depend on where the two first differ, so the key cannot be guessed byte by byte.
//
// Threading: pure function.
#pragma once

#include <string_view>

namespace headway::serving::http {

// True when `authorization` is "Bearer " (scheme case-insensitive) followed by exactly `api_key`.
bool bearer_matches(std::string_view authorization, std::string_view api_key);

}  // namespace headway::serving::http
