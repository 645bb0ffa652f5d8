// A plugin whose author forgot extern "C": the entry point is exported under its C++-mangled name,
// so the host finds no headway_plugin_entry and must say why.
#include <headway/abi.h>

HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry() { return nullptr; }
