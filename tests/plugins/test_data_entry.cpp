// A library that exports a variable named headway_plugin_entry instead of the function: calling it
// would jump into data and kill the host, so the registry must look at the symbol's type first.
#include <headway/abi.h>

extern "C" HW_EXPORT const int headway_plugin_entry = 5;
