// The filters, tests, global functions and methods chat templates may call. The parser refuses any
// other name at load time; each function here throws std::runtime_error with a message (the
// evaluator adds the template line) on arguments of the wrong type or number.
//
// Threading: pure functions (strftime_now reads the clock).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja_value.h"

namespace headway::serving::jinja {

using Arguments = std::vector<Value>;
using KeywordArguments = std::vector<std::pair<std::string, Value>>;

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
bool is_function(std::string_view name);  // raise_exception is handled by the evaluator
bool is_method(std::string_view name);
// Names Jinja2 (or Python, for methods) has and Headway does not: templates that use one are
// refused at load. List and dict methods that change their object (append, update, ...) are not
// among them: Hugging Face's sandbox refuses those when they are called, and so does Headway.
bool lacks_jinja_filter(std::string_view name);
bool lacks_jinja_test(std::string_view name);
bool lacks_jinja_global(std::string_view name);
bool lacks_python_method(std::string_view name);

Value apply_filter(const std::string& name, const Value& target, const Arguments& args,
                   const KeywordArguments& kwargs);
bool apply_test(const std::string& name, const Value& target, const Arguments& args);
Value call_function(const std::string& name, const Arguments& args, const KeywordArguments& kwargs);
Value call_method(const std::string& name, const Value& target, const Arguments& args,
                  const KeywordArguments& kwargs);

// The characters of a UTF-8 string, one string each (what iterating a Python str gives). A value
// each takes some 130 bytes: a string of more than kMaxIteratedCharacters is refused
// (std::runtime_error), since a client's 30 MB message took 4 GB and 13 s to iterate. Indexing,
// slicing and measuring a string do not come here (character_count() and character_offset()).
constexpr size_t kMaxIteratedCharacters = size_t{1} << 20;
std::vector<Value> characters(const std::string& text);

// Code points of UTF-8 `text`: Python's len() of a str.
size_t character_count(std::string_view text);
// Byte offset at which code point `index` begins; text.size() for index == character_count().
size_t character_offset(std::string_view text, size_t index);

// What iterating `v` gives (list items, dict keys, string characters; nothing for undefined). A
// list is returned where it is, not copied: a subscript or `| last` on the messages in a loop over
// them stays linear. Anything else is built in `scratch`. Throws std::runtime_error naming `what`
// when `v` cannot be iterated.
const List& elements(const std::string& what, const Value& v, List& scratch);

}  // namespace headway::serving::jinja
