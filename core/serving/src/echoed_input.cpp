#include "headway/serving/echoed_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "headway/core/utf8.h"

namespace headway::serving {

std::string quote_input(std::string_view input) {
  std::string out = "\"";
  size_t taken = 0;
  while (taken < input.size()) {
    const std::string_view rest = input.substr(taken);
    const size_t length = core::utf8::complete_length(rest);  // 0: not UTF-8, escaped byte by byte
    const size_t step = std::max<size_t>(length, 1);
    if (taken + step > kMaxEchoedBytes) break;
    const auto byte = static_cast<uint8_t>(rest[0]);
    if (length > 1) {
      out.append(rest.substr(0, length));
    } else if (byte == '"' || byte == '\\') {
      out += '\\';
      out += static_cast<char>(byte);
    } else if (length == 0 || byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += static_cast<char>(byte);
    }
    taken += step;
  }
  out += '"';
  if (taken < input.size()) {
    // The quote closes after the ellipsis: the reader sees where the cut is.
    out.insert(out.size() - 1, "\u2026");
    out += fmt::format(" ({} bytes)", input.size());
  }
  return out;
}

std::string shortened(std::string message, size_t max_bytes) {
  if (message.size() <= max_bytes) return message;
  const size_t size = message.size();
  size_t cut = max_bytes;
  // Back to the start of the character the cut falls in (continuation bytes are 10xxxxxx; a
  // character has at most three, so text that is not UTF-8 loses no more than that).
  for (int back = 0; back < 3 && cut > 0 && (static_cast<uint8_t>(message[cut]) & 0xC0) == 0x80;
       ++back) {
    --cut;
  }
  message.resize(cut);
  message += fmt::format("\u2026 ({} bytes)", size);
  return message;
}

}  // namespace headway::serving
