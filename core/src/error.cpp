#include "headway/core/error.h"

#include <cstring>
#include <string_view>

#include "headway/core/utf8.h"

namespace headway::core {

std::string plugin_message(const hw_status& status) {
  const size_t length = strnlen(status.message, sizeof(status.message));
  std::string message;
  utf8::append_valid(std::string_view(status.message, length), message);
  if (message.empty()) return "(the plugin gave no message)";
  return message;
}

}  // namespace headway::core
