#include <headway/core/cluster.h>
#include <headway/core/error.h>

namespace headway::core {

Cluster::Cluster(const DeploymentConfig& config,
                 std::chrono::steady_clock::time_point wall_origin) {
  for (const EngineConfig& engine : config.engines) {
    engines_.push_back(std::make_unique<Engine>(engine, config, wall_origin));
  }
  alive_.assign(engines_.size(), true);
  if (engines_.front()->clock().is_virtual()) {
    clock_ = std::make_unique<VirtualClock>();
  } else {
    clock_ = std::make_unique<WallClock>(wall_origin);
  }
  router_host_ = std::make_unique<HostServices>("router", clock_.get());
  loads_.resize(engines_.size());
  for (size_t i = 0; i < engines_.size(); ++i) loads_[i] = engines_[i]->load();
  router_ = std::make_unique<RouterInstance>(config.router, loads_, *router_host_);
}

Cluster::~Cluster() {
  router_.reset();  // before the host services it was created with
}

hw_route_decision Cluster::route(const hw_route_request& request) {
  for (size_t i = 0; i < engines_.size(); ++i) {
    loads_[i] = engines_[i]->load();
    loads_[i].alive = alive_[i] ? 1 : 0;
  }
  return router_->route(request, loads_);
}

}  // namespace headway::core
