// The engines of a deployment and the router in front of them, in one process.
//
// Ownership: the cluster owns its engines, its router instance and the host services of the
// router. Threading: route() and load refreshes happen on the thread that drives the cluster (the
// simulator, or the frontend's dispatcher); engines are stepped by their own driver.
#pragma once

#include <headway/core/clock.h>
#include <headway/core/deployment_config.h>
#include <headway/core/engine.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>

#include <chrono>
#include <memory>
#include <vector>

namespace headway::core {

class Cluster {
 public:
  explicit Cluster(
      const DeploymentConfig& config,
      std::chrono::steady_clock::time_point wall_origin = std::chrono::steady_clock::now());
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  size_t size() const { return engines_.size(); }
  Engine& engine(size_t i) { return *engines_[i]; }
  const Engine& engine(size_t i) const { return *engines_[i]; }
  // True when the engines run on the virtual clock (simulated model).
  bool is_virtual() const { return clock_->is_virtual(); }
  // The router's clock: the time of the event being handled.
  Clock& clock() { return *clock_; }

  // Asks the router where a request goes, with every engine's current load. Throws Error.
  hw_route_decision route(const hw_route_request& request);

  void set_alive(size_t engine, bool alive) { alive_[engine] = alive; }
  const std::string& router_name() const { return router_->name(); }

 private:
  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<bool> alive_;
  std::vector<hw_engine_load> loads_;
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<HostServices> router_host_;
  std::unique_ptr<RouterInstance> router_;
};

}  // namespace headway::core
