// Writing a KV transport as a C++ class. Header-only; plugin side.
// Lifetimes: the Host may be kept, by reference or by copy (it lives as long as the instance); the
// Options are valid only during the constructor: read every option there.
// Threading: instances are called from several threads; the class synchronises itself.
#pragma once

#include <headway/abi.h>

#include <algorithm>
#include <cstdint>
#include <headway/sdk/host.hpp>
#include <headway/sdk/options.hpp>
#include <headway/sdk/status.hpp>
#include <string>
#include <type_traits>
#include <vector>

namespace headway::sdk {

// Whether block `block` of `memory` lies inside it: [block * block_stride, + block_bytes) within
// [0, bytes), compared by division so that no product overflows.
inline bool block_in_region(const hw_memory_desc& memory, uint32_t block) {
  if (memory.bytes < memory.block_bytes) return false;
  return memory.block_stride == 0 ||
         uint64_t{block} <= (memory.bytes - memory.block_bytes) / memory.block_stride;
}

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

// Peer links (abi.h, ABI 1.2): a transport that also derives from KvPeerLinks fills the table's
// peer_* functions; one that does not leaves them NULL and the host never asks for links.
class KvPeerLinks {
 public:
  virtual ~KvPeerLinks() = default;
  // A new rendezvous id (at most HW_PEER_ID_MAX bytes).
  virtual std::vector<uint8_t> peer_rendezvous() = 0;
  // Joins `id` as `rank`; returns the link at once (peer_state() says when it is up).
  virtual uint64_t peer_join(const std::vector<uint8_t>& id, int32_t rank, int32_t memory_kind,
                             int32_t device_id) = 0;
  virtual hw_transfer_state peer_state(uint64_t link) = 0;
  virtual uint64_t peer_post(uint64_t link, hw_peer_direction direction,
                             const hw_memory_desc& memory, const uint32_t* blocks,
                             uint32_t block_count) = 0;
  virtual void peer_close(uint64_t link) noexcept = 0;
};

// T is constructible from (const Host&, const Options&).
template <class T>
struct KvTransportAdapter {
  static constexpr int32_t kind = HW_KIND_KV_TRANSPORT;
  static KvTransport* self(hw_kv_transport* t) {
    return &reinterpret_cast<WithHost<T>*>(t)->object;
  }

  static int32_t create(const hw_host_services* host, const hw_options* options,
                        hw_kv_transport** out, hw_status* status) {
    return guarded(status, [&] {
      *out = reinterpret_cast<hw_kv_transport*>(new WithHost<T>(host, Options(options)));
    });
  }
  static void destroy(hw_kv_transport* t) { delete reinterpret_cast<WithHost<T>*>(t); }
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

  // Peer links, for a T that derives from KvPeerLinks.
  static KvPeerLinks* links(hw_kv_transport* t) {
    if constexpr (std::is_base_of_v<KvPeerLinks, T>) {
      return &reinterpret_cast<WithHost<T>*>(t)->object;
    } else {
      return nullptr;
    }
  }
  static int32_t peer_rendezvous(hw_kv_transport* t, uint8_t* id, uint64_t capacity, uint64_t* size,
                                 hw_status* status) {
    return guarded(status, [&] {
      const std::vector<uint8_t> made = links(t)->peer_rendezvous();
      if (made.size() > capacity || made.size() > HW_PEER_ID_MAX) {
        throw Error(HW_INTERNAL, "peer rendezvous id of " + std::to_string(made.size()) +
                                     " bytes does not fit in " + std::to_string(capacity));
      }
      std::copy(made.begin(), made.end(), id);
      *size = made.size();
    });
  }
  static int32_t peer_join(hw_kv_transport* t, const uint8_t* id, uint64_t size, int32_t rank,
                           int32_t memory_kind, int32_t device_id, uint64_t* link,
                           hw_status* status) {
    return guarded(status, [&] {
      *link =
          links(t)->peer_join(std::vector<uint8_t>(id, id + size), rank, memory_kind, device_id);
    });
  }
  static int32_t peer_state(hw_kv_transport* t, uint64_t link, int32_t* state, hw_status* status) {
    return guarded(status, [&] { *state = links(t)->peer_state(link); });
  }
  static int32_t peer_post(hw_kv_transport* t, uint64_t link, int32_t direction,
                           const hw_memory_desc* memory, const uint32_t* blocks,
                           uint32_t block_count, uint64_t* handle, hw_status* status) {
    return guarded(status, [&] {
      if (direction != HW_PEER_SEND && direction != HW_PEER_RECEIVE) {
        throw Error(HW_INVALID_ARGUMENT,
                    "peer_post: unknown direction " + std::to_string(direction));
      }
      *handle = links(t)->peer_post(link, static_cast<hw_peer_direction>(direction), *memory,
                                    blocks, block_count);
    });
  }
  static void peer_close(hw_kv_transport* t, uint64_t link) { links(t)->peer_close(link); }

  static constexpr bool kHasLinks = std::is_base_of_v<KvPeerLinks, T>;
  static constexpr hw_kv_transport_table table = {sizeof(hw_kv_transport_table),
                                                  &create,
                                                  &destroy,
                                                  &start,
                                                  &poll,
                                                  kHasLinks ? &peer_rendezvous : nullptr,
                                                  kHasLinks ? &peer_join : nullptr,
                                                  kHasLinks ? &peer_state : nullptr,
                                                  kHasLinks ? &peer_post : nullptr,
                                                  kHasLinks ? &peer_close : nullptr};
};

}  // namespace headway::sdk
