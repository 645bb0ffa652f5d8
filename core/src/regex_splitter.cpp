#include "regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <headway/core/error.h>
#include <pcre2.h>

#include <cctype>
#include <string_view>

namespace headway::core {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? "PCRE2 error " + std::to_string(code)
               : std::string(reinterpret_cast<char*>(buffer));
}

// Enough for the look-ahead of Llama 3's pattern over very long runs of whitespace; the JIT
// reports PCRE2_ERROR_JIT_STACKLIMIT (an Error, not a crash) beyond it.
constexpr size_t kJitStackMax = 8u << 20;

// What a match needs besides the pattern, made once per thread: the JIT stack reserves
// kJitStackMax of address space, and making it per call cost a mapping for every stretch of text
// between two special tokens (a chat prompt has several per message). The match data holds the
// whole match's offsets only: with a pattern that has groups, pcre2_match then returns 0 ("vector
// too small") and still sets them.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32u << 10, kJitStackMax, nullptr);
  MatchScratch() {
    if (context != nullptr && stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

// Unicode's White_Space characters, which `\s` means in Oniguruma, the engine Hugging Face's
// tokenizers run these patterns on. PCRE2's `\s` under UCP also takes U+180E (Mongolian vowel
// separator, White_Space until Unicode 6.3, still in PCRE2's horizontal space list), which would
// split Mongolian words where the model's tokenizer never did.
constexpr std::string_view kWhiteSpaceRanges =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Constructs after which the scan below could mistake text for a class or an escape (a comment,
// extended mode's comments, \c's control character, a POSIX class): a pattern with one is compiled
// as written, which differs from Oniguruma's at U+180E alone. No tokenizer's pattern we know has
// one.
bool has_constructs_the_scan_skips(std::string_view pattern) {
  for (const std::string_view risky : {"(?#", "\\c"}) {
    if (pattern.find(risky) != std::string_view::npos) return true;
  }
  // A POSIX class, [:alpha:] (not a class that merely starts with ':', as [:,]).
  for (size_t at = pattern.find("[:"); at != std::string_view::npos;
       at = pattern.find("[:", at + 2)) {
    size_t k = at + 2;
    if (k < pattern.size() && pattern[k] == '^') ++k;
    while (k < pattern.size() && std::isalpha(static_cast<unsigned char>(pattern[k]))) ++k;
    if (pattern.substr(k, 2) == ":]") return true;
  }
  // An inline flag group that turns extended mode on: (?x), (?ix), (?^x:...
  for (size_t at = pattern.find("(?"); at != std::string_view::npos;
       at = pattern.find("(?", at + 2)) {
    bool extended = false;
    for (size_t k = at + 2; k < pattern.size() && pattern[k] != ')' && pattern[k] != ':'; ++k) {
      const char c = pattern[k];
      if (c == 'x') {
        extended = true;
      } else if (!std::isalpha(static_cast<unsigned char>(c)) && c != '^' && c != '-') {
        extended = false;  // not a flag group: a look-around, a named group, ...
        break;
      }
    }
    if (extended) return true;
  }
  return false;
}

// Refuses what means one thing to Oniguruma (Ruby syntax, the engine Hugging Face's tokenizers
// use) and another to PCRE2: \h and \H (a hexadecimal digit there, horizontal space here), \v and
// \V (the vertical tab alone there, any vertical space here) and the flag m in a group (a dot
// that matches a newline there, ^ and $ at lines here, which Oniguruma does anyway: the pattern is
// compiled with PCRE2_MULTILINE).
void refuse_ambiguous_constructs(std::string_view pattern, const std::string& where) {
  const auto refuse = [&](const std::string& what, const std::string& there,
                          const std::string& here) {
    throw Error(where + ": " + what + " means " + there +
                " to Oniguruma, the engine Hugging Face's tokenizers use, and " + here +
                " to PCRE2; Headway does not guess which was meant");
  };
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '\\') continue;
    const char c = pattern[i + 1];
    if (c == 'h' || c == 'H')
      refuse("\\" + std::string(1, c), "a hexadecimal digit", "horizontal space");
    if (c == 'v' || c == 'V')
      refuse("\\" + std::string(1, c), "the vertical tab", "vertical space");
    ++i;  // the escaped character is not an escape of its own
  }
  for (size_t at = pattern.find("(?"); at != std::string_view::npos;
       at = pattern.find("(?", at + 2)) {
    for (size_t k = at + 2; k < pattern.size() && pattern[k] != ')' && pattern[k] != ':'; ++k) {
      const char c = pattern[k];
      if (c == 'm') refuse("the flag m", "a dot that matches a newline", "^ and $ at each line");
      if (!std::isalpha(static_cast<unsigned char>(c)) && c != '^' && c != '-') break;
    }
  }
}

// `pattern` with every `\s` written as kWhiteSpaceRanges (in a class or as one) and every `\S`
// outside a class as its complement (a '[' inside a class is a literal: a POSIX class would end
// the class early, and patterns with one are left as written). A `\S` inside a class is left to
// PCRE2 (no real tokenizer's pattern has one; it differs from Oniguruma's at U+180E alone). Escapes
// are copied whole, so a
// `\\s` stays a backslash and an `s`; \Q...\E is copied as it is.
std::string with_unicode_white_space(std::string_view pattern) {
  if (has_constructs_the_scan_skips(pattern)) return std::string(pattern);
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out +=
            in_class ? std::string(kWhiteSpaceRanges) : "[" + std::string(kWhiteSpaceRanges) + "]";
      } else if (next == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceRanges) + "]";
      } else if (next == 'Q') {
        const size_t end = pattern.find("\\E", i + 1);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i - 1, stop - (i - 1)));
        i = stop - 1;
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' first in a class (after an optional '^') is a literal, not its end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::string& pattern, bool literal, const std::string& where)
    : compiled_(std::make_unique<Compiled>()), where_(where) {
  // PCRE2_LITERAL refuses PCRE2_UCP (a literal has no classes for it to affect). MULTILINE: ^ and
  // $ match at every line, as Oniguruma's always do.
  const uint32_t options =
      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
  int error = 0;
  PCRE2_SIZE offset = 0;
  {
    // Compiled first as written, so that an error's offset is one into the pattern the user has.
    pcre2_code* as_written = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                           pattern.size(), options, &error, &offset, nullptr);
    if (as_written == nullptr) {
      throw Error(where + ": the pattern does not compile at offset " + std::to_string(offset) +
                  ": " + pcre2_message(error));
    }
    if (literal) {
      compiled_->code = as_written;
    } else {
      pcre2_code_free(as_written);
      refuse_ambiguous_constructs(pattern, where);
      const std::string rewritten = with_unicode_white_space(pattern);
      compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()),
                                      rewritten.size(), options, &error, &offset, nullptr);
      if (compiled_->code == nullptr) {
        throw Error(where +
                    ": the pattern does not compile once its \\s is Unicode's White_Space: " +
                    pcre2_message(error));
      }
    }
  }
  // Without JIT support (some platforms) the interpreter gives the same matches, only slower.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  thread_local MatchScratch scratch;
  pcre2_match_data* data = scratch.data;
  pcre2_match_context* context = scratch.context;
  if (data == nullptr || context == nullptr || (compiled_->jit && scratch.stack == nullptr)) {
    throw Error(where_ + ": out of memory for the pre-tokenizer pattern", HW_RESOURCE_EXHAUSTED);
  }

  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;    // where the next search starts
  size_t emitted = 0;  // everything before this is in `out`
  int failure = 0;
  while (start < text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), start, 0, data, context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {  // 0 is a match whose groups did not fit: the whole match is there
      failure = rc;
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (begin > emitted) out.push_back(text.substr(emitted, begin - emitted));
    if (end > begin) {
      out.push_back(text.substr(begin, end - begin));
      emitted = end;
      start = end;
    } else {
      // An empty match: step over one character (or one invalid byte) so the loop ends.
      emitted = begin;
      start = begin + 1;
      while (start < text.size() && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
  if (failure == 0 && emitted < text.size()) out.push_back(text.substr(emitted));
  if (failure != 0) {
    throw Error(where_ +
                ": the pre-tokenizer pattern failed on the input: " + pcre2_message(failure));
  }
}

}  // namespace headway::core
