#include "health_mirror.h"

#include <exception>
#include <utility>

namespace headway::serving::grpc_frontend {

HealthMirror::HealthMirror(GenerationService& service, grpc::HealthCheckServiceInterface& health,
                           std::string service_name, std::chrono::milliseconds period)
    : service_(service), health_(health), service_name_(std::move(service_name)), period_(period) {
  refresh();  // so that the first probe after start() already sees the real state
  thread_ = std::thread([this] { run(); });
}

HealthMirror::~HealthMirror() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void HealthMirror::refresh() {
  bool serving = false;
  try {
    serving = service_.health().serving;
  } catch (const std::exception&) {
    serving = false;  // a service that cannot say it is healthy is not
  }
  if (published_ == serving) return;  // Watch streams are only told about changes
  // Name by name: the all-names overload would set service_name_ a second time, and Watch streams
  // would see every change twice.
  health_.SetServingStatus("", serving);  // the server as a whole
  health_.SetServingStatus(service_name_, serving);
  published_ = serving;
}

void HealthMirror::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period_, [this] { return stopping_; })) {
    lock.unlock();
    refresh();
    lock.lock();
  }
}

}  // namespace headway::serving::grpc_frontend
