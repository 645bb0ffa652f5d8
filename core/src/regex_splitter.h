// Splits text at the matches of a pre-tokenizer pattern, as Hugging Face's Split pre-tokenizer
// with behavior "Isolated" does: every match is a piece and so is every stretch of text between
// two matches. The pattern runs on PCRE2 (UTF + UCP, so \p{L}, \s and friends are Unicode-aware,
// and JIT-compiled when the platform allows), the Perl-compatible engine these patterns were
// written for; std::regex has neither Unicode classes nor look-ahead over code points. Hugging
// Face runs them on Oniguruma (Ruby syntax): `\s` is rewritten to its White_Space, ^ and $ match
// at lines as there, and what the two read differently (\h, \v, the flag m) is refused.
//
// Input that is not valid UTF-8 is accepted (PCRE2_MATCH_INVALID_UTF): invalid bytes never match,
// so they end up in the pieces between matches and the tokenizer stays lossless.
//
// Ownership: owns the compiled pattern. Threading: split() is const and safe to call concurrently
// (each thread matches with match data and a JIT stack of its own, kept for the thread's life).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace headway::core {

class RegexSplitter {
 public:
  // `literal`: the pattern is a plain string (a Split with {"String": ...}). `where` names the
  // file and field for errors. Throws Error when the pattern does not compile.
  RegexSplitter(const std::string& pattern, bool literal, const std::string& where);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of `text` to `out` (views into `text`; empty pieces are dropped).
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string where_;
};

}  // namespace headway::core
