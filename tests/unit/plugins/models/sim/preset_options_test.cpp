// The sim plugin's enum options against the preset tables they select from: a preset added to one
// list only would be unselectable, or an option value would have no shape behind it.
#include <gtest/gtest.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>

#include <string>
#include <vector>

#include "presets.h"

namespace headway::models::sim {
namespace {

TEST(SimPresetOptions, TheOptionsOfferEveryPresetInTheTablesOrderThenCustom) {
  core::PluginRegistry registry;
  registry.add_search_directory(HEADWAY_PLUGIN_DIR);
  const core::LoadedPlugin& sim = registry.find("sim", HW_KIND_MODEL);
  std::vector<std::string> models;
  for (const ModelPreset& preset : model_presets()) models.emplace_back(preset.name);
  models.emplace_back("custom");
  EXPECT_EQ(core::enum_values(*sim.descriptor, "model"), models);
  std::vector<std::string> gpus;
  for (const GpuPreset& preset : gpu_presets()) gpus.emplace_back(preset.name);
  gpus.emplace_back("custom");
  EXPECT_EQ(core::enum_values(*sim.descriptor, "gpu"), gpus);
}

}  // namespace
}  // namespace headway::models::sim
