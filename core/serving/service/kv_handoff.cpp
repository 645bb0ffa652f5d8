#include "kv_handoff.h"

namespace headway::serving {

uint64_t KvHandoff::start(const hw_kv_transfer& transfer) {
  std::lock_guard lock(mutex_);
  return transport_.start(transfer);
}

core::KvTransportInstance::Progress KvHandoff::poll(uint64_t handle) {
  std::lock_guard lock(mutex_);
  return transport_.poll(handle);
}

}  // namespace headway::serving
