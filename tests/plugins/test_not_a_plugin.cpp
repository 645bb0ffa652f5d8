// A shared library that is not a Headway plugin: it exports a symbol, but not headway_plugin_entry.
#include <headway/abi.h>

extern "C" HW_EXPORT int headway_test_not_a_plugin(void) { return 42; }
