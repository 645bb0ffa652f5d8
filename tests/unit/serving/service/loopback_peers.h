// KV-link peers for tests that run both engine processes' services in one test process: the other
// services by "address", called directly (what the gRPC worker API does between processes).
// Threading: any thread (the decode service's link threads call it).
#pragma once

#include <headway/serving/local_generation_service.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace headway::serving::test {

// The other services by "address", called directly (what the gRPC worker API does between
// processes). Unknown addresses fail as an unreachable process does.
class LoopbackPeers final : public KvLinkPeers {
 public:
  void add(const std::string& address, GenerationService* service) {
    std::lock_guard lock(mutex_);
    services_[address] = service;
  }
  void remove(const std::string& address) {
    std::lock_guard lock(mutex_);
    services_.erase(address);
  }
  void open_link(const std::string& address, const std::string& link_name,
                 const std::vector<uint8_t>& rendezvous) override {
    find(address).open_kv_link(link_name, rendezvous);
  }
  void send_held(const std::string& address, const std::string& link_name, const KvStage& held,
                 bool drop) override {
    ++sends_;
    find(address).send_held_kv(link_name, held, drop);
  }
  int sends() const { return sends_; }

 private:
  GenerationService& find(const std::string& address) {
    std::lock_guard lock(mutex_);
    auto it = services_.find(address);
    if (it == services_.end()) {
      throw ServiceError(ErrorCode::kUnavailable, "connection to " + address + " refused");
    }
    return *it->second;
  }
  std::mutex mutex_;
  std::map<std::string, GenerationService*> services_;
  std::atomic<int> sends_{0};
};

inline LocalServiceOptions with_peers(std::shared_ptr<KvLinkPeers> peers) {
  LocalServiceOptions options;
  options.kv_link_peers = std::move(peers);
  return options;
}

}  // namespace headway::serving::test
