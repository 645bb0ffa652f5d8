// C++ side of hw_status: an exception type plugins may throw, and the firewall that turns any
// exception into a status before it could cross the C boundary. Header-only; plugin side.
#pragma once

#include <headway/abi.h>

#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace headway::sdk {

// Thrown by plugin code to return a specific status code; any other exception becomes HW_INTERNAL.
class Error : public std::exception {
 public:
  Error(hw_status_code code, std::string message) : code_(code), message_(std::move(message)) {}
  hw_status_code code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  hw_status_code code_;
  std::string message_;
};

inline std::string_view view(hw_str s) { return s.data ? std::string_view(s.data, s.size) : ""; }

// A null pointer gives the empty string (an absent default, say), never strlen(nullptr).
constexpr hw_str make_str(const char* literal) {
  return literal == nullptr ? hw_str{nullptr, 0}
                            : hw_str{literal, std::char_traits<char>::length(literal)};
}

// Fills status (caller-owned) with code and a truncated, NUL-terminated copy of message.
inline int32_t set_status(hw_status* status, hw_status_code code, std::string_view message) {
  if (status != nullptr) {
    status->code = code;
    size_t n = message.size() < HW_STATUS_MESSAGE_CAPACITY - 1 ? message.size()
                                                               : HW_STATUS_MESSAGE_CAPACITY - 1;
    std::memcpy(status->message, message.data(), n);
    status->message[n] = '\0';
  }
  return code;
}

// Runs body() and converts every exception into a status: the exception firewall every generated
// C entry point goes through.
template <class Body>
int32_t guarded(hw_status* status, Body&& body) noexcept {
  try {
    body();
    return HW_OK;
  } catch (const Error& e) {
    // An Error thrown with HW_OK would return success with no result set (a transport's start()
    // with no handle): the call failed, so it fails as the plugin's bug.
    if (e.code() == HW_OK) {
      return set_status(status, HW_INTERNAL,
                        std::string("sdk::Error thrown with HW_OK: ") + e.what());
    }
    return set_status(status, e.code(), e.what());
  } catch (const std::exception& e) {
    return set_status(status, HW_INTERNAL, e.what());
  } catch (...) {
    return set_status(status, HW_INTERNAL, "unknown exception in plugin");
  }
}

}  // namespace headway::sdk
