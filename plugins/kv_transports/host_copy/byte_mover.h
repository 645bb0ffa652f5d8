// How a peer link's thread copies bytes between the KV memory it was given and its ring in shared
// memory: with memcpy for KV in host memory; with cudaMemcpyAsync on a stream of the link's own
// for KV on a GPU (device_copy.h). A link publishes ring bytes only after finish(), so the other
// process never reads a ring range a copy is still writing, nor sees it freed while a copy still
// reads it.
//
// Threading: one thread at a time (the link thread that owns it).
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

namespace headway::kv_transports::host_copy {

class ByteMover {
 public:
  virtual ~ByteMover() = default;
  // Copies (or queues the copy of) `bytes` from `source` to `destination`. Returns an empty
  // string, or what failed.
  virtual std::string copy(void* destination, const void* source, size_t bytes) = 0;
  // Waits until every copy queued so far has landed. Returns an empty string, or what failed.
  virtual std::string finish() = 0;
};

class HostByteMover final : public ByteMover {
 public:
  std::string copy(void* destination, const void* source, size_t bytes) override {
    std::memcpy(destination, source, bytes);
    return {};
  }
  std::string finish() override { return {}; }
};

}  // namespace headway::kv_transports::host_copy
