// Writing a KV transport as a C++ class. Header-only; plugin side.
// Threading: instances are called from several threads; the class synchronises itself.
#pragma once

#include <headway/abi.h>

#include <headway/sdk/host.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>

namespace headway::sdk {

struct TransferProgress {
  hw_transfer_state state;
  double seconds;
};

class KvTransport {
 public:
  virtual ~KvTransport() = default;
  virtual uint64_t start(const hw_kv_transfer& transfer) = 0;
  virtual TransferProgress poll(uint64_t handle) = 0;
};

// T is constructible from (const Host&, const Options&).
template <class T>
struct KvTransportAdapter {
  static constexpr int32_t kind = HW_KIND_KV_TRANSPORT;
  static KvTransport* self(hw_kv_transport* t) { return reinterpret_cast<KvTransport*>(t); }

  static int32_t create(const hw_host_services* host, const hw_options* options,
                        hw_kv_transport** out, hw_status* status) {
    return guarded(status, [&] {
      KvTransport* instance = new T(Host(host), Options(options));
      *out = reinterpret_cast<hw_kv_transport*>(instance);
    });
  }
  static void destroy(hw_kv_transport* t) { delete self(t); }
  static int32_t start(hw_kv_transport* t, const hw_kv_transfer* transfer, uint64_t* handle,
                       hw_status* status) {
    return guarded(status, [&] { *handle = self(t)->start(*transfer); });
  }
  static int32_t poll(hw_kv_transport* t, uint64_t handle, int32_t* state, double* seconds,
                      hw_status* status) {
    return guarded(status, [&] {
      TransferProgress p = self(t)->poll(handle);
      *state = p.state;
      *seconds = p.seconds;
    });
  }
  static constexpr hw_kv_transport_table table = {sizeof(hw_kv_transport_table), &create, &destroy,
                                                  &start, &poll};
};

}  // namespace headway::sdk
