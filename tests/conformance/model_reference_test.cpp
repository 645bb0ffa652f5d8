// The CPU reference model is conformant on a tiny checkpoint, and the wrong-RoPE copy of it is
// caught by model.reference_logits alone. Skipped when the CPU model is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "suite_runner.h"

namespace {

namespace fs = std::filesystem;
using headway::conformance::Outcome;

class ModelReferenceTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    checkpoint_ =
        fs::temp_directory_path() / ("headway_conformance_tiny_" + std::to_string(getpid()));
    const std::string command =
        std::string(HEADWAY_CLI) + " model make-tiny --layers 2 --hidden 128 " +
        "--heads 4 --kv-heads 2 --ffn 256 --out " + checkpoint_.string() + " > /dev/null 2>&1";
    made_ = std::system(command.c_str()) == 0;
  }
  static void TearDownTestSuite() { fs::remove_all(checkpoint_); }
  void SetUp() override {
    if (!fs::exists(std::string(HEADWAY_PLUGIN_DIR) + "/headway_model_cpu.so")) {
      GTEST_SKIP() << "the CPU model plugin is not built";
    }
    ASSERT_TRUE(made_) << "headway model make-tiny failed";
  }
  std::string options() const { return "path = \"" + checkpoint_.string() + "\", threads = 2"; }

  static inline fs::path checkpoint_;
  static inline bool made_ = false;
};

TEST_F(ModelReferenceTest, CpuModelIsConformant) {
  const auto r = headway::test::run_suite(std::string(HEADWAY_PLUGIN_DIR) + "/headway_model_cpu.so",
                                          options());
  EXPECT_TRUE(r.conformant()) << headway::test::describe(r);
  EXPECT_EQ(headway::test::find_test(r, "model.reference_logits")->outcome, Outcome::kPass);
  EXPECT_EQ(headway::test::find_test(r, "model.prompt_logits")->outcome, Outcome::kPass)
      << headway::test::describe(r);
}

TEST_F(ModelReferenceTest, WrongRopeFailsOnlyReferenceLogits) {
  const std::string path = std::string(HEADWAY_FAULTY_PLUGIN_DIR) + "/faulty_wrong_rope_model.so";
  if (!fs::exists(path)) GTEST_SKIP() << "the wrong-RoPE model is built only with the CPU model";
  const auto r = headway::test::run_suite(path, options());
  EXPECT_FALSE(r.conformant());
  EXPECT_EQ(headway::test::find_test(r, "model.reference_logits")->outcome, Outcome::kFail)
      << headway::test::describe(r);
  // Consistent with itself: only the comparison with the reference can see the bug.
  EXPECT_EQ(headway::test::find_test(r, "model.chunking_invariance")->outcome, Outcome::kPass);
  EXPECT_EQ(headway::test::find_test(r, "model.batch_invariance")->outcome, Outcome::kPass);
}

}  // namespace
