// The host's error type. Every user-facing failure (bad config, bad plugin, bad request, bad
// workload) is thrown as an Error whose message names what is wrong and where; the CLI prints it as
// one line and exits non-zero.
#pragma once

#include <headway/abi.h>

#include <stdexcept>
#include <string>

namespace headway::core {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, hw_status_code code = HW_INVALID_ARGUMENT)
      : std::runtime_error(message), code_(code) {}
  hw_status_code code() const noexcept { return code_; }

 private:
  hw_status_code code_;
};

// A plugin broke the ABI's contract in a way the host can see: a status code or a transfer state
// that abi.h does not define. The conformance suite fails a plugin on it where it would otherwise
// take the call as an ordinary failure.
class PluginContractError : public Error {
 public:
  using Error::Error;
};

// A failed plugin call's message as the host may use it: read within the status's buffer (a
// plugin that left no NUL must not make the host read past it, into its own stack), with bytes
// that are not UTF-8 replaced (the message goes into logs, JSON reports and clients' errors), and
// "(the plugin gave no message)" when it is empty.
std::string plugin_message(const hw_status& status);

// Throws Error when a plugin call returned a failure; `what` names the call and the plugin.
inline void check_status(int32_t code, const hw_status& status, const std::string& what) {
  if (code == HW_OK) return;
  if (code < HW_OK || code > HW_DEADLINE_EXCEEDED) {
    throw PluginContractError(
        what + ": status code " + std::to_string(code) +
            ", which abi.h does not define (hw_status_code): " + plugin_message(status),
        HW_INTERNAL);
  }
  throw Error(what + ": " + plugin_message(status), static_cast<hw_status_code>(code));
}

}  // namespace headway::core
