// A library whose headway_plugin_entry() throws (hand-written; the export macros cannot): the
// registry must name the file and say the exception came from the entry, not pass its bare text on.
#include <headway/abi.h>

#include <stdexcept>

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) {
  throw std::runtime_error("test_throwing_entry: thrown from the entry");
}
