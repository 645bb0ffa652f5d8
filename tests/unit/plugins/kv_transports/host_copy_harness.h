// The host_copy transport as core::Cluster creates it (loaded from the built plugin directory
// through core::PluginRegistry, driven through the C ABI by core::KvTransportInstance), for the
// transport's unit tests.
#pragma once

#include <gtest/gtest.h>
#include <headway/abi.h>
#include <headway/core/clock.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <toml++/toml.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>
#include <thread>

#include "../../test_support/error_of.h"

namespace headway::core {

inline PluginRegistry& registry() {
  static PluginRegistry* r = new PluginRegistry();
  return *r;
}

// A transport instance as the cluster creates it, from options written as TOML.
class TransportHarness {
 public:
  explicit TransportHarness(std::string_view options_toml = "") : host_("kv_transport", &clock_) {
    const LoadedPlugin& plugin = registry().load_path(std::filesystem::path(HEADWAY_PLUGIN_DIR) /
                                                      "headway_kv_transport_host_copy.so");
    toml::table table = toml::parse(options_toml, std::string_view("test.toml"));
    PluginChoice choice;
    choice.where = "test.toml: kv_transport";
    choice.plugin = &plugin;
    choice.options = std::make_shared<const PluginOptions>(
        PluginOptions::from_toml(*plugin.descriptor, &table, "test.toml: kv_transport.options"));
    transport_ = std::make_unique<KvTransportInstance>(choice, host_);
  }
  KvTransportInstance* operator->() { return transport_.get(); }
  KvTransportInstance& operator*() { return *transport_; }
  void reset() { transport_.reset(); }

 private:
  VirtualClock clock_;
  HostServices host_;
  std::unique_ptr<KvTransportInstance> transport_;
};

// Polls until the transfer leaves PENDING. The bound only keeps a broken transport from hanging the
// test run; it is not a timing expectation.
inline KvTransportInstance::Progress wait(KvTransportInstance& transport, uint64_t handle) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (true) {
    KvTransportInstance::Progress p = transport.poll(handle);
    if (p.state != HW_TRANSFER_PENDING) return p;
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "transfer " << handle << " still pending after 60 s";
      return p;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

using ::headway::test::error_of;

}  // namespace headway::core
