// C++ view of the host services table handed to a plugin at create(). Header-only; plugin side.
// Thread-safe, like the services it wraps; valid until the instance is destroyed. The adapters
// keep the Host a constructor receives alive as long as the instance (WithHost below), so a class
// may store `const Host&` as well as a copy.
#pragma once

#include <headway/abi.h>

#include <headway/sdk/status.hpp>
#include <string_view>
#include <utility>

namespace headway::sdk {

class Host {
 public:
  explicit Host(const hw_host_services* services) : services_(services) {}

  void log(hw_log_level level, std::string_view message) const {
    if (services_ != nullptr && services_->log != nullptr) {
      services_->log(services_->context, level, hw_str{message.data(), message.size()});
    }
  }
  double now() const {
    return services_ != nullptr && services_->now != nullptr ? services_->now(services_->context)
                                                             : 0.0;
  }
  void counter_add(std::string_view name, double delta) const {
    if (services_ != nullptr && services_->counter_add != nullptr) {
      services_->counter_add(services_->context, hw_str{name.data(), name.size()}, delta);
    }
  }
  void gauge_set(std::string_view name, double value) const {
    if (services_ != nullptr && services_->gauge_set != nullptr) {
      services_->gauge_set(services_->context, hw_str{name.data(), name.size()}, value);
    }
  }
  const hw_host_services* raw() const { return services_; }

 private:
  const hw_host_services* services_;
};

// What an adapter's handle points to: the Host handed to T's constructor, then the instance. The
// Host lives exactly as long as the instance, so a reference to it taken in the constructor stays
// valid (a temporary Host made that a dangling reference, and a crash at the first log).
template <class T>
struct WithHost {
  template <class... Args>
  explicit WithHost(const hw_host_services* services, Args&&... args)
      : host(services), object(host, std::forward<Args>(args)...) {}
  Host host;
  T object;
};

}  // namespace headway::sdk
