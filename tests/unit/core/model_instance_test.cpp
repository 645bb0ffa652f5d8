// What the host checks of a model's answers before an engine relies on them (ModelInstance): an
// info without a vocabulary or KV size, an info whose struct_size covers nothing, a forward() that
// wrote another number of logits rows than asked, a create() that set no handle. A hand-written
// table in the test, no library.
#include <gtest/gtest.h>
#include <headway/core/clock.h>
#include <headway/core/error.h>
#include <headway/core/host_services.h>
#include <headway/core/plugin_instances.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>

#include <memory>
#include <string>

#include "toy_model_info.h"

namespace headway::core {
namespace {

// What the table's functions answer: set by each test before it creates the instance.
hw_model_info g_info{};
uint32_t g_rows_written = 0;
bool g_create_sets_handle = true;

hw_model_info usable_info() {
  hw_model_info i = test::toy_model_info(8);
  i.returns_logits = 1;
  return i;
}

int32_t create(const hw_host_services*, const hw_options*, hw_str, hw_model** out, hw_status*) {
  static int handle = 0;
  if (g_create_sets_handle) *out = reinterpret_cast<hw_model*>(&handle);
  return HW_OK;
}
void destroy(hw_model*) {}
int32_t get_info(hw_model*, hw_model_info* info, hw_status*) {
  *info = g_info;
  return HW_OK;
}
int32_t init_kv(hw_model*, uint32_t, uint32_t, hw_status*) { return HW_OK; }
int32_t forward(hw_model*, const hw_model_batch*, hw_model_output* output, hw_status*) {
  output->logits_rows = g_rows_written;
  return HW_OK;
}

const hw_model_table kTable{
    sizeof(hw_model_table), &create, &destroy, &get_info, &init_kv, nullptr, &forward};
const hw_plugin_descriptor kDescriptor{sizeof(hw_plugin_descriptor),
                                       HW_ABI_MAJOR,
                                       HW_ABI_MINOR,
                                       HW_KIND_MODEL,
                                       {"org.test.hand_model", 19},
                                       {"hand_model", 10},
                                       {"0.0.1", 5},
                                       {"", 0},
                                       nullptr,
                                       0,
                                       &kTable};

class ModelInstanceTest : public ::testing::Test {
 protected:
  ModelInstanceTest() {
    plugin_.descriptor = &kDescriptor;
    choice_.where = "deploy.toml: model";
    choice_.plugin = &plugin_;
    choice_.options =
        std::make_shared<const PluginOptions>(PluginOptions::from_toml(kDescriptor, nullptr, "t"));
    g_info = usable_info();
    g_create_sets_handle = true;
  }
  std::unique_ptr<ModelInstance> make() {
    return std::make_unique<ModelInstance>(choice_, ".", host_);
  }
  // The message make() throws, or a failure.
  std::string refusal() {
    try {
      make();
    } catch (const PluginContractError& e) {
      // The plugin's fault, not its options': conformance fails it instead of asking for options.
      EXPECT_EQ(e.code(), HW_INTERNAL);
      return e.what();
    }
    ADD_FAILURE() << "the model was taken";
    return {};
  }

  VirtualClock clock_;
  HostServices host_{"engine0 model hand_model", &clock_};
  LoadedPlugin plugin_;
  PluginChoice choice_;
};

TEST_F(ModelInstanceTest, AnInfoWithoutVocabularyOrKvSizeIsRefusedAtLoad) {
  EXPECT_NO_THROW(make());
  g_info.vocab = 0;
  g_info.kv_bytes_per_token = 0;
  EXPECT_EQ(refusal(),
            "deploy.toml: model: model 'hand_model' get_info: vocab 0 (the vocabulary size must "
            "be at least 1); kv_bytes_per_token 0 (a token's KV takes bytes: the model's, all "
            "layers, K and V)");
}

TEST_F(ModelInstanceTest, AnInfoWhoseStructSizeCoversNothingIsRefused) {
  g_info.struct_size = 0;
  EXPECT_NE(refusal().find("get_info: struct_size 0 is smaller than ABI 1.0's"), std::string::npos);
  // A 1.4-sized struct: the 1.5 field past it reads as 0, whatever the bytes there.
  g_info = usable_info();
  g_info.returns_logits = 0;
  g_info.returns_logits_on_request = 1;
  g_info.struct_size = offsetof(hw_model_info, returns_logits_on_request);
  EXPECT_EQ(make()->info().returns_logits_on_request, 0);
}

TEST_F(ModelInstanceTest, ACreateThatSetsNoHandleIsRefused) {
  g_create_sets_handle = false;
  EXPECT_EQ(refusal(),
            "deploy.toml: model: model 'hand_model' create: returned HW_OK but left the handle "
            "(*out) NULL; create() must set it to the instance every later call receives");
}

TEST_F(ModelInstanceTest, AForwardThatWritesAnotherNumberOfRowsIsAContractError) {
  std::unique_ptr<ModelInstance> model = make();
  hw_model_batch batch{sizeof(hw_model_batch), nullptr, 0, 16, nullptr};
  float logits[2 * 8] = {};
  for (const uint32_t written : {1u, 3u}) {
    g_rows_written = written;
    hw_model_output out{sizeof(hw_model_output), nullptr, 0.0, logits, 2, 8};
    try {
      model->forward(batch, out);
      ADD_FAILURE() << written << " rows taken for 2";
    } catch (const PluginContractError& e) {
      EXPECT_EQ(std::string(e.what()),
                "model 'hand_model' wrote " + std::to_string(written) +
                    " logits rows where the batch asks for 2 (hw_model_output.logits_rows, "
                    "headway::sdk::logits_rows)");
    }
  }
  g_rows_written = 2;
  hw_model_output out{sizeof(hw_model_output), nullptr, 0.0, logits, 2, 8};
  EXPECT_NO_THROW(model->forward(batch, out));
}

}  // namespace
}  // namespace headway::core
