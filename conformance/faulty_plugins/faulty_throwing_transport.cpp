// Faulty on purpose: a hand-written C table (no SDK adapter, so no exception firewall) that copies
// transfers synchronously and throws std::out_of_range out of start() for a block outside its
// region, through the C ABI (a third-party author's "raw" transport did). The host turns the
// exception into an error naming the call, but it is undefined behaviour, not a refusal:
// kv.failure_reported must FAIL it, as it fails an undefined status code. Every round trip passes.
#include <headway/abi.h>

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_set>

#include "host_block_copy.h"

namespace {

struct Transport {
  std::mutex mutex;
  std::unordered_set<uint64_t> done;  // transfers started and not yet polled
  uint64_t next = 1;
};

int32_t create(const hw_host_services*, const hw_options*, hw_kv_transport** out, hw_status*) {
  *out = reinterpret_cast<hw_kv_transport*>(new Transport());
  return HW_OK;
}
void destroy(hw_kv_transport* t) { delete reinterpret_cast<Transport*>(t); }

int32_t start(hw_kv_transport* tp, const hw_kv_transfer* t, uint64_t* handle, hw_status*) {
  if (!headway::faulty::copy_host_blocks(*t)) {
    throw std::out_of_range("faulty_throwing: a block is outside its region");
  }
  auto* transport = reinterpret_cast<Transport*>(tp);
  std::lock_guard lock(transport->mutex);
  *handle = transport->next++;
  transport->done.insert(*handle);
  return HW_OK;
}

int32_t poll(hw_kv_transport* tp, uint64_t handle, int32_t* state, double* seconds,
             hw_status* status) {
  auto* transport = reinterpret_cast<Transport*>(tp);
  std::lock_guard lock(transport->mutex);
  if (transport->done.erase(handle) == 0) {
    status->code = HW_NOT_FOUND;
    std::strncpy(status->message, "unknown handle", sizeof(status->message) - 1);
    return HW_NOT_FOUND;
  }
  *state = HW_TRANSFER_DONE;
  *seconds = 1e-4;
  return HW_OK;
}

// Through poll(): no peer links (ABI 1.2's functions NULL).
const hw_kv_transport_table kTable = {sizeof(hw_kv_transport_table),
                                      &create,
                                      &destroy,
                                      &start,
                                      &poll,
                                      nullptr,
                                      nullptr,
                                      nullptr,
                                      nullptr,
                                      nullptr};

constexpr hw_str str(const char* s, uint64_t n) { return hw_str{s, n}; }

const hw_plugin_descriptor kDescriptor = {sizeof(hw_plugin_descriptor),
                                          HW_ABI_MAJOR,
                                          HW_ABI_MINOR,
                                          HW_KIND_KV_TRANSPORT,
                                          str("org.headway.faulty.throwing_transport", 37),
                                          str("faulty_throwing", 15),
                                          str("0.0.1", 5),
                                          str("Faulty on purpose: throws through the C ABI", 43),
                                          nullptr,
                                          0,
                                          &kTable};

}  // namespace

extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) { return &kDescriptor; }
