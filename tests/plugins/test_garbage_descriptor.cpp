// Refused plugin: its entry returns a pointer to nothing (an address in the first pages, which
// Linux never maps), as a mis-built or corrupted library might. Reading it would kill the host with
// SIGSEGV; the host must refuse it by name instead.
#include <headway/abi.h>

#include <cstdint>

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) {
  return reinterpret_cast<const hw_plugin_descriptor*>(uintptr_t{0x1000});
}
