#include "kv_handoff.h"

namespace headway::serving {

uint64_t KvHandoff::start(const hw_kv_transfer& transfer) { return transport_.start(transfer); }

core::KvTransportInstance::Progress KvHandoff::poll(uint64_t handle) {
  return transport_.poll(handle);
}

std::vector<uint8_t> KvHandoff::peer_rendezvous() { return transport_.peer_rendezvous(); }

uint64_t KvHandoff::peer_join(const std::vector<uint8_t>& id, int32_t rank,
                              const hw_memory_desc& memory) {
  return transport_.peer_join(id, rank, memory);
}

int32_t KvHandoff::peer_state(uint64_t link) { return transport_.peer_state(link); }

uint64_t KvHandoff::peer_post(uint64_t link, hw_peer_direction direction,
                              const hw_memory_desc& memory, std::span<const uint32_t> blocks) {
  return transport_.peer_post(link, direction, memory, blocks);
}

void KvHandoff::peer_close(uint64_t link) { transport_.peer_close(link); }

}  // namespace headway::serving
