#include "byte_dfa.h"

#include <fmt/format.h>
#include <headway/serving/service_error.h>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace headway::serving::guided {

namespace {

struct ByteEdge {
  uint8_t low;
  uint8_t high;
  uint32_t to;
};

struct NfaState {
  std::vector<uint32_t> empty;  // transitions that read nothing
  std::vector<ByteEdge> bytes;
};

// Thompson's construction: each node of the tree becomes a fragment with one entry and one exit
// state; a repeat instantiates its child once per copy it needs.
class NfaBuilder {
 public:
  NfaBuilder(const RegexTree& tree, const std::string& field) : tree_(tree), field_(field) {}

  struct Fragment {
    uint32_t entry;
    uint32_t exit;
  };

  Fragment build(uint32_t node) {
    const RegexNode& n = tree_.nodes[node];
    switch (n.kind) {
      case RegexKind::kEmpty: {
        const uint32_t s = state();
        return {s, s};
      }
      case RegexKind::kChars:
        return chars(n.chars);
      case RegexKind::kConcat: {
        Fragment whole = build(n.children[0]);
        for (size_t i = 1; i < n.children.size(); ++i) {
          const Fragment next = build(n.children[i]);
          link(whole.exit, next.entry);
          whole.exit = next.exit;
        }
        return whole;
      }
      case RegexKind::kAlternate: {
        const Fragment whole{state(), state()};
        for (const uint32_t child : n.children) {
          const Fragment branch = build(child);
          link(whole.entry, branch.entry);
          link(branch.exit, whole.exit);
        }
        return whole;
      }
      case RegexKind::kRepeat:
        return repeat(n);
    }
    return {state(), state()};
  }

  std::vector<NfaState> take() { return std::move(states_); }

 private:
  uint32_t state() {
    if (states_.size() >= kMaxNfaStates) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("{}: the regular expression is too large (over {} automaton "
                                     "states; large counts such as {{1000}} multiply its size)",
                                     field_, kMaxNfaStates),
                         field_);
    }
    states_.emplace_back();
    return static_cast<uint32_t>(states_.size() - 1);
  }
  void link(uint32_t from, uint32_t to) { states_[from].empty.push_back(to); }

  Fragment chars(const CodePointSet& set) {
    const Fragment whole{state(), state()};
    for (const Utf8Sequence& sequence : utf8_sequences(set)) {
      uint32_t at = whole.entry;
      for (uint8_t i = 0; i < sequence.length; ++i) {
        const uint32_t to = i + 1 == sequence.length ? whole.exit : state();
        states_[at].bytes.push_back({sequence.low[i], sequence.high[i], to});
        at = to;
      }
    }
    return whole;
  }

  Fragment repeat(const RegexNode& n) {
    const uint32_t child = n.children[0];
    const uint32_t entry = state();
    uint32_t exit = entry;
    for (uint32_t i = 0; i < n.min; ++i) {
      const Fragment copy = build(child);
      link(exit, copy.entry);
      exit = copy.exit;
    }
    if (n.max == kUnboundedRepeat) {
      // exit -> loop -> (child -> loop)* -> end
      const uint32_t loop = state();
      const uint32_t end = state();
      link(exit, loop);
      const Fragment copy = build(child);
      link(loop, copy.entry);
      link(copy.exit, loop);
      link(loop, end);
      return {entry, end};
    }
    // min copies, then max - min optional ones, each skipping to the end.
    const uint32_t end = state();
    for (uint32_t i = n.min; i < n.max; ++i) {
      link(exit, end);
      const Fragment copy = build(child);
      link(exit, copy.entry);
      exit = copy.exit;
    }
    link(exit, end);
    return {entry, end};
  }

  const RegexTree& tree_;
  const std::string& field_;
  std::vector<NfaState> states_;
};

// The states reachable from `set` by transitions that read nothing, sorted (a DFA state's key).
void close_over_empty(const std::vector<NfaState>& nfa, std::vector<uint32_t>& set,
                      std::vector<uint8_t>& seen) {
  for (const uint32_t s : set) seen[s] = 1;
  for (size_t i = 0; i < set.size(); ++i) {
    for (const uint32_t to : nfa[set[i]].empty) {
      if (seen[to] == 0) {
        seen[to] = 1;
        set.push_back(to);
      }
    }
  }
  for (const uint32_t s : set) seen[s] = 0;
  std::sort(set.begin(), set.end());
}

// Refuses (naming `field`) an automaton of `states` states past kMaxDfaStates, or whose table
// would pass kMaxPatternCells.
void check_size(size_t states, uint32_t classes, const std::string& field, const char* what) {
  if (states > kMaxDfaStates) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: {} needs more than {} automaton states (patterns such as "
                                   "(a|b)*a(a|b){{20}} grow exponentially, and lengths multiply "
                                   "them); simplify it",
                                   field, what, kMaxDfaStates),
                       field);
  }
  if (states * classes > kMaxPatternCells) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: {} needs more than {} automaton cells (states times the "
                                   "byte classes it tells apart); simplify it",
                                   field, what, kMaxPatternCells),
                       field);
  }
}

struct StateSetHash {
  size_t operator()(const std::vector<uint32_t>& set) const {
    uint64_t hash = 1469598103934665603ull;  // FNV-1a over the state numbers
    for (const uint32_t s : set) hash = (hash ^ s) * 1099511628211ull;
    return static_cast<size_t>(hash);
  }
};

bool forbidden_in_json_string(uint8_t byte) { return byte < 0x20 || byte == '"' || byte == '\\'; }

}  // namespace

ByteDfa build_byte_dfa(const RegexTree& tree, bool json_string, const std::string& field,
                       CompileBudget& budget) {
  NfaBuilder builder(tree, field);
  const NfaBuilder::Fragment whole = builder.build(tree.root);
  const std::vector<NfaState> nfa = builder.take();

  ByteDfa dfa;
  // Byte classes: a new class starts wherever some transition's range (or the JSON-string rule)
  // starts or ends, so every byte of a class goes to the same states everywhere.
  std::array<bool, 257> starts_class{};
  starts_class[0] = true;
  for (const NfaState& s : nfa) {
    for (const ByteEdge& edge : s.bytes) {
      starts_class[edge.low] = true;
      starts_class[edge.high + 1] = true;
    }
  }
  if (json_string) {
    for (const int byte : {0x20, int{'"'}, '"' + 1, int{'\\'}, '\\' + 1}) starts_class[byte] = true;
  }
  std::vector<uint8_t> representative;
  for (int byte = 0; byte < 256; ++byte) {
    if (starts_class[byte]) representative.push_back(static_cast<uint8_t>(byte));
    dfa.class_of_[byte] = static_cast<uint8_t>(representative.size() - 1);
  }
  dfa.classes_ = static_cast<uint32_t>(representative.size());

  std::vector<uint8_t> seen(nfa.size(), 0);
  std::unordered_map<std::vector<uint32_t>, uint32_t, StateSetHash> ids;
  std::vector<std::vector<uint32_t>> sets;
  // The construction's cost is the NFA states it visits: bounded, so that a pattern whose DFA
  // states hold many NFA states each (large counts of loops) is refused in well under a second.
  const auto id_of = [&](std::vector<uint32_t> set) {
    close_over_empty(nfa, set, seen);
    if (set.empty()) return ByteDfa::kDead;
    if (set.size() > budget.steps) {
      throw ServiceError(ErrorCode::kInvalidArgument,
                         fmt::format("{}: the regular expression is too costly to compile (over {} "
                                     "steps, with any other patterns of its schema; large counts "
                                     "of repeated groups multiply them); simplify it",
                                     field, kMaxSubsetWork),
                         field);
    }
    budget.steps -= set.size();
    const auto [it, added] = ids.emplace(set, static_cast<uint32_t>(sets.size()));
    if (added) {
      check_size(sets.size() + 1, dfa.classes_, field, "the regular expression");
      sets.push_back(std::move(set));
    }
    return it->second;
  };
  dfa.start_ = id_of({whole.entry});
  std::vector<uint32_t> moved;
  for (size_t at = 0; at < sets.size(); ++at) {
    dfa.accepting_.push_back(std::binary_search(sets[at].begin(), sets[at].end(), whole.exit));
    for (uint32_t c = 0; c < dfa.classes_; ++c) {
      const uint8_t byte = representative[c];
      moved.clear();
      if (!(json_string && forbidden_in_json_string(byte))) {
        for (const uint32_t s : sets[at]) {
          for (const ByteEdge& edge : nfa[s].bytes) {
            if (edge.low <= byte && byte <= edge.high) moved.push_back(edge.to);
          }
        }
      }
      dfa.table_.push_back(id_of(moved));  // may grow `sets`: index, never hold references
    }
  }

  dfa.prune(field, json_string ? " that a JSON string holds without escapes (a guided string "
                                 "never writes '\"', '\\\\' or control characters)"
                               : "");
  return dfa;
}

// Live states reach an accepting one; transitions into the rest become kDead.
void ByteDfa::prune(const std::string& field, const char* why_none) {
  const size_t count = accepting_.size();
  // Backwards from the accepting states over the reversed transitions.
  std::vector<std::vector<uint32_t>> sources(count);
  for (size_t s = 0; s < count; ++s) {
    for (uint32_t c = 0; c < classes_; ++c) {
      const uint32_t to = table_[s * classes_ + c];
      if (to != ByteDfa::kDead) sources[to].push_back(static_cast<uint32_t>(s));
    }
  }
  std::vector<uint8_t> live(accepting_);
  std::vector<uint32_t> todo;
  for (size_t s = 0; s < count; ++s) {
    if (live[s] != 0) todo.push_back(static_cast<uint32_t>(s));
  }
  while (!todo.empty()) {
    const uint32_t s = todo.back();
    todo.pop_back();
    for (const uint32_t from : sources[s]) {
      if (live[from] == 0) {
        live[from] = 1;
        todo.push_back(from);
      }
    }
  }
  if (live[start_] == 0) {
    throw ServiceError(
        ErrorCode::kInvalidArgument,
        fmt::format("{}: the regular expression matches no string{}", field, why_none), field);
  }
  for (uint32_t& to : table_) {
    if (to != ByteDfa::kDead && live[to] == 0) to = ByteDfa::kDead;
  }
}

template <typename ClassKey, typename Step, typename Accepting>
ByteDfa ByteDfa::of_pairs(ClassKey class_key, StatePair start, Step step, Accepting accepting,
                          const std::string& field, const char* what, const char* why_none) {
  ByteDfa out;
  std::map<uint32_t, uint8_t> keys;
  std::vector<uint8_t> representative;
  for (int byte = 0; byte < 256; ++byte) {
    const auto [it, added] = keys.emplace(class_key(static_cast<uint8_t>(byte)),
                                          static_cast<uint8_t>(representative.size()));
    if (added) representative.push_back(static_cast<uint8_t>(byte));
    out.class_of_[byte] = it->second;
  }
  out.classes_ = static_cast<uint32_t>(representative.size());
  std::map<StatePair, uint32_t> ids;
  std::vector<StatePair> states;
  const auto id_of = [&](StatePair pair) {
    if (pair.first == kDead) return kDead;
    const auto [it, added] = ids.emplace(pair, static_cast<uint32_t>(states.size()));
    if (added) {
      check_size(states.size() + 1, out.classes_, field, what);
      states.push_back(pair);
    }
    return it->second;
  };
  out.start_ = id_of(start);
  for (size_t at = 0; at < states.size(); ++at) {
    const StatePair pair = states[at];  // a copy: id_of may grow `states`
    out.accepting_.push_back(accepting(pair) ? 1 : 0);
    for (uint32_t c = 0; c < out.classes_; ++c)
      out.table_.push_back(id_of(step(pair, representative[c])));
  }
  out.prune(field, why_none);
  return out;
}

ByteDfa intersect(const ByteDfa& a, const ByteDfa& b, const std::string& field) {
  // A byte's class is its pair of classes; a state, a pair of states (kDead in either: none).
  return ByteDfa::of_pairs(
      [&](uint8_t byte) { return uint32_t{a.class_of_[byte]} << 8 | b.class_of_[byte]; },
      {a.start_, b.start_},
      [&](ByteDfa::StatePair pair, uint8_t byte) -> ByteDfa::StatePair {
        const uint32_t second = b.next(pair.second, byte);
        return {second == ByteDfa::kDead ? ByteDfa::kDead : a.next(pair.first, byte), second};
      },
      [&](ByteDfa::StatePair pair) { return a.accepting(pair.first) && b.accepting(pair.second); },
      field, "the two patterns together", " that both patterns accept");
}

ByteDfa with_length(const ByteDfa& dfa, uint32_t min, uint32_t max, const std::string& field) {
  // A state is the automaton's and the characters so far. Bytes 0x80 to 0xBF continue a
  // character, every other byte starts one, so that splits the classes too. Counts above min
  // matter only up to max; with no max, only up to min.
  const auto starts = [](uint8_t byte) { return byte < 0x80 || byte >= 0xC0; };
  const uint32_t cap = max == kUnboundedRepeat ? min : max;
  return ByteDfa::of_pairs(
      [&](uint8_t byte) { return uint32_t{dfa.class_of_[byte]} << 1 | (starts(byte) ? 1 : 0); },
      {dfa.start_, 0},
      [&](ByteDfa::StatePair pair, uint8_t byte) -> ByteDfa::StatePair {
        const uint32_t count = pair.second + (starts(byte) ? 1 : 0);
        if (max != kUnboundedRepeat && count > max) return {ByteDfa::kDead, 0};
        return {dfa.next(pair.first, byte), std::min(count, cap)};
      },
      [&](ByteDfa::StatePair pair) { return dfa.accepting(pair.first) && pair.second >= min; },
      field, "the pattern with its length limits", " within the length limits");
}

ByteDfa compile_regex(std::string_view pattern, RegexMatch match, bool json_string,
                      const std::string& field, CompileBudget& budget) {
  return build_byte_dfa(parse_regex(pattern, match, field), json_string, field, budget);
}

ByteDfa compile_regex(std::string_view pattern, RegexMatch match, bool json_string,
                      const std::string& field) {
  CompileBudget budget;
  return compile_regex(pattern, match, json_string, field, budget);
}

}  // namespace headway::serving::guided
