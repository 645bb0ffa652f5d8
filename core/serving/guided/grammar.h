// The grammar a guided request's output must follow, compiled from a JSON schema (json_schema.h),
// a regular expression, a list of choices or a context-free grammar (ebnf_syntax.h): a graph of
// nodes, each one kind of value or text. GrammarMatcher walks it byte by byte.
//
// The JSON it describes is written the way models write JSON most often: no whitespace except one
// optional space after each ',' and ':' (both `{"a":1,"b":2}` and Python's `{"a": 1, "b": 2}`),
// an object's declared properties in their declared order (optional ones may be left out).
//
// Ownership: plain values; a Grammar owns its nodes. Threading: immutable once built, shared
// freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "byte_dfa.h"
#include "integer_range.h"
#include "number_range.h"

namespace headway::serving::guided {

inline constexpr uint32_t kUnbounded = UINT32_MAX;

// Limits that keep a hostile schema from costing the engine thread without bound: how many anyOf
// choices may be open before a byte decides them (what one byte may fork), how many parse stacks
// a place may have, and how big a grammar, an object or a list of literals may be.
inline constexpr int kMaxChoiceDepth = 64;
inline constexpr size_t kMaxStacks = 256;
// The pieces of work (a stack fed a step, a fork) one byte may take in the matcher, over all its
// stacks: past it the rest are dropped. The compilers' bounds keep real grammars far below it.
inline constexpr size_t kMaxForkWork = 65536;
inline constexpr size_t kMaxNodes = 65536;
inline constexpr size_t kMaxProperties = 1024;
inline constexpr size_t kMaxLiterals = 16384;
// The most values an array of unique items may choose from (each is a bit of its frame).
inline constexpr size_t kMaxUniqueLiterals = 32;
// The frames one parse stack may hold: how deep a recursive grammar (parentheses inside
// parentheses) may nest before the guide refuses to go deeper.
inline constexpr size_t kMaxStackFrames = 1024;

enum class NodeKind : uint8_t {
  kObject,    // '{' ... '}'
  kArray,     // '[' ... ']'
  kString,    // a JSON string
  kNumber,    // a JSON number
  kInteger,   // a JSON number without fraction or exponent, within `range`
  kLiterals,  // exactly one of `literals` (JSON text such as `true` or `"red"`, or raw choices)
  kAnyOf,     // any one of `branches`
  kRegex,     // raw text (no quotes) that `pattern` matches whole: vLLM's guided_regex
  kSequence,  // `parts`, one after another (a grammar's sequence; none: the empty text)
  kRepeat,    // `items`, between min_items and max_items times (a grammar's quantifier)
};

inline constexpr uint32_t kNoPattern = UINT32_MAX;
inline constexpr uint32_t kAnyKey = UINT32_MAX;

struct GrammarProperty {
  std::string key;  // the key as written between its quotes (JSON-escaped)
  uint32_t value = 0;
  bool required = false;
  // How many of the properties after this one are required: what an object that writes this one
  // must still write, for min_properties and max_properties.
  uint32_t required_after = 0;
};

struct GrammarNode {
  NodeKind kind = NodeKind::kLiterals;
  // kObject. With properties: exactly those keys may appear, in this order, the required ones
  // always. Without: any keys (free_keys), each value a `free_value`.
  std::vector<GrammarProperty> properties;
  bool free_keys = false;
  uint32_t free_value = 0;
  // kObject with free keys: the node each key is a value of, quotes and all (JSON Schema's
  // propertyNames; its values are all strings); kAnyKey: any string.
  uint32_t free_key = kAnyKey;
  // kObject: how many properties it has, declared or free (JSON Schema's minProperties and
  // maxProperties). With declared properties the compiler keeps these within what they allow.
  uint32_t min_properties = 0;
  uint32_t max_properties = kUnbounded;
  // kArray: element k a `prefix_items[k]` (a tuple's positions), the rest `items`; between
  // min_items and max_items of them. kRepeat: `items` between min_items and max_items times.
  std::vector<uint32_t> prefix_items;
  uint32_t items = 0;
  uint32_t min_items = 0;
  uint32_t max_items = kUnbounded;
  // kArray: no two items alike (JSON Schema's uniqueItems). Only where `items` is a kLiterals
  // node of at most kMaxUniqueLiterals values, no two of them equal as JSON, and there are no
  // prefix_items: each value is refused once written, and max_items is at most their number.
  bool unique_items = false;
  // kInteger: the values allowed (unbounded: any).
  IntegerRange range;
  // kNumber: the values allowed (unbounded: any); a bounded number has no exponent.
  NumberRange number;
  // kString: length in characters (code points; an escape is one).
  uint32_t min_length = 0;
  uint32_t max_length = kUnbounded;
  // kString: the characters between the quotes, written without escapes, are a string
  // `patterns[pattern]` accepts (lengths folded in); kNoPattern: any. kRegex: the text's pattern.
  uint32_t pattern = kNoPattern;
  // kLiterals: sorted, unique, none empty.
  std::vector<std::string> literals;
  // kAnyOf.
  std::vector<uint32_t> branches;
  // kSequence.
  std::vector<uint32_t> parts;
  // kSequence, kAnyOf, kRepeat: whether the node matches the empty text (a grammar's optional
  // parts). A JSON value never does; a kRegex node does when its pattern matches "".
  bool nullable = false;
};

struct Grammar {
  std::vector<GrammarNode> nodes;
  std::vector<ByteDfa> patterns;
  uint32_t root = 0;
  // The answer is raw text (a regular expression's, a choice's, a grammar's), not a JSON value:
  // no blank may come before it.
  bool raw_text = false;
};

// A grammar whose output is raw text that `pattern` matches whole (vLLM's guided_regex). Throws
// ServiceError (kInvalidArgument, param `field`) for a pattern regex_syntax.h refuses.
Grammar regex_grammar(std::string_view pattern, const std::string& field);

// A grammar whose output is exactly one of `choices` (vLLM's guided_choice), as raw text. Throws
// ServiceError (kInvalidArgument, param `field`) when there are none or one is empty.
Grammar choice_grammar(std::vector<std::string> choices, const std::string& field);

// A grammar for any JSON object (OpenAI's response_format {"type": "json_object"}).
Grammar any_json_object_grammar();

// A grammar whose output is raw text that the GBNF grammar `text` (ebnf_syntax.h) derives from
// its `root` rule (vLLM's guided_grammar). Throws ServiceError (kInvalidArgument, param `field`)
// naming the line, column or rule at fault: a syntax error, left recursion (a rule that can reach
// itself before a character), a repeated part that may match nothing, or a grammar past the
// limits.
Grammar ebnf_grammar(std::string_view text, const std::string& field);

}  // namespace headway::serving::guided
