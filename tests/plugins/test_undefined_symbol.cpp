// A library built without headway_add_plugin (so without --no-undefined) that needs a function no
// library provides: dlopen refuses it, and the host must say which symbol, readably.
#include <headway/abi.h>

int helper_from_a_missing_library(int);

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) {
  return helper_from_a_missing_library(1) > 0 ? nullptr : nullptr;
}
