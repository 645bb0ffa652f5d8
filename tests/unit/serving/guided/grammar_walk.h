// Test helper: where a text leaves a grammar's matcher.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "grammar.h"
#include "grammar_matcher.h"

namespace headway::serving::guided {

// Where `text` leaves the matcher: "dead" (a byte was refused), "complete" or "open".
inline std::string walk(const Grammar& grammar, std::string_view text) {
  GrammarMatcher matcher(grammar);
  MatchState state;
  MatchState next;
  matcher.start(state);
  for (const char byte : text) {
    if (!matcher.advance(state, static_cast<uint8_t>(byte), next)) return "dead";
    std::swap(state, next);
  }
  return matcher.complete(state) ? "complete" : "open";
}

}  // namespace headway::serving::guided
