// Whether memory a plugin points the host to can be read, found without touching it. A plugin's
// descriptor is plain data the host must trust; a garbage pointer in it (an uninitialised field, a
// descriptor from another build) would otherwise kill the whole process with SIGSEGV while it
// loads plugins, before any error could name the library.
//
// Threading: any thread; changes nothing the caller can see.
#pragma once

#include <cstddef>

namespace headway::core {

// True when every byte of [address, address + bytes) is mapped and readable; true for 0 bytes.
// The bytes travel through a pipe: the kernel copies them and answers EFAULT for a page that is
// not there, where a load in this process would fault. Meant for load-time checks (a few KiB),
// not for hot paths: each call makes a pipe.
bool readable_memory(const void* address, size_t bytes);

}  // namespace headway::core
