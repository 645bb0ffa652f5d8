#include "unicode_nfc.h"

#include <headway/core/error.h>
#include <headway/core/utf8.h>
#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace headway::core {
namespace {

// Appends the NFC form of `run`, valid UTF-8.
void append_nfc(std::string_view run, std::string& out) {
  if (run.empty()) return;
  utf8proc_uint8_t* composed = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                   static_cast<utf8proc_ssize_t>(run.size()), &composed,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(composed, &std::free);
  if (length < 0) {
    // Only an allocation failure is left for valid input.
    throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(length));
  }
  out.append(reinterpret_cast<const char*>(composed), static_cast<size_t>(length));
}

}  // namespace

std::string to_nfc(std::string_view text) {
  if (std::all_of(text.begin(), text.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    return std::string(text);  // ASCII is its own NFC
  }
  std::string out;
  out.reserve(text.size());
  size_t run = 0;  // where the valid text not yet normalized starts
  for (size_t at = 0; at < text.size();) {
    if (static_cast<unsigned char>(text[at]) < 0x80) {
      ++at;
      continue;
    }
    const size_t length = utf8::complete_length(text.substr(at));
    if (length > 0) {
      at += length;
      continue;
    }
    append_nfc(text.substr(run, at - run), out);
    out += text[at];  // not UTF-8: kept as it is
    run = ++at;
  }
  append_nfc(text.substr(run), out);
  return out;
}

}  // namespace headway::core
