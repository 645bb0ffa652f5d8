// The one macro a plugin writes: exports headway_plugin_entry() returning a descriptor built from a
// C++ class, its kind adapter and its option schema. Header-only; plugin side.
#pragma once

#include <headway/abi.h>

#include <cstdint>
#include <headway/sdk/status.hpp>

namespace headway::sdk {

// Pass as the options argument of the export macros when a plugin has no options.
struct NoOptions {};
inline constexpr NoOptions no_options{};

struct OptionList {
  const hw_option_spec* specs;
  uint32_t count;
};
template <uint32_t N>
constexpr OptionList option_list(const hw_option_spec (&specs)[N]) {
  return OptionList{specs, N};
}
constexpr OptionList option_list(NoOptions) { return OptionList{nullptr, 0}; }

template <class Adapter>
constexpr hw_plugin_descriptor make_descriptor(const char* name, const char* short_name,
                                               const char* version, const char* description,
                                               OptionList options) {
  return hw_plugin_descriptor{sizeof(hw_plugin_descriptor),
                              HW_ABI_MAJOR,
                              HW_ABI_MINOR,
                              Adapter::kind,
                              make_str(name),
                              make_str(short_name),
                              make_str(version),
                              make_str(description),
                              options.specs,
                              options.count,
                              &Adapter::table};
}

}  // namespace headway::sdk

#define HEADWAY_DEFINE_PLUGIN_ENTRY(ADAPTER, NAME, SHORT_NAME, VERSION, DESCRIPTION, OPTIONS)    \
  extern "C" HW_EXPORT const hw_plugin_descriptor* headway_plugin_entry(void) {                  \
    static constexpr hw_plugin_descriptor descriptor = ::headway::sdk::make_descriptor<ADAPTER>( \
        NAME, SHORT_NAME, VERSION, DESCRIPTION, ::headway::sdk::option_list(OPTIONS));           \
    return &descriptor;                                                                          \
  }

#define HEADWAY_EXPORT_SCHEDULER(CLASS, NAME, SHORT_NAME, VERSION, DESCRIPTION, OPTIONS)          \
  HEADWAY_DEFINE_PLUGIN_ENTRY(::headway::sdk::SchedulerAdapter<CLASS>, NAME, SHORT_NAME, VERSION, \
                              DESCRIPTION, OPTIONS)
#define HEADWAY_EXPORT_ROUTER(CLASS, NAME, SHORT_NAME, VERSION, DESCRIPTION, OPTIONS)          \
  HEADWAY_DEFINE_PLUGIN_ENTRY(::headway::sdk::RouterAdapter<CLASS>, NAME, SHORT_NAME, VERSION, \
                              DESCRIPTION, OPTIONS)
#define HEADWAY_EXPORT_MODEL(CLASS, NAME, SHORT_NAME, VERSION, DESCRIPTION, OPTIONS)          \
  HEADWAY_DEFINE_PLUGIN_ENTRY(::headway::sdk::ModelAdapter<CLASS>, NAME, SHORT_NAME, VERSION, \
                              DESCRIPTION, OPTIONS)
#define HEADWAY_EXPORT_KV_TRANSPORT(CLASS, NAME, SHORT_NAME, VERSION, DESCRIPTION, OPTIONS) \
  HEADWAY_DEFINE_PLUGIN_ENTRY(::headway::sdk::KvTransportAdapter<CLASS>, NAME, SHORT_NAME,  \
                              VERSION, DESCRIPTION, OPTIONS)
