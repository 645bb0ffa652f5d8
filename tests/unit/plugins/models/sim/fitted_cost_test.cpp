// The sim model's fitted cost mode: a hand-written cost file gives step times computed by hand from
// its coefficients, and every malformed file is refused with a message naming the file and the key.
#include "fitted_cost.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace headway::models::sim {
namespace {

namespace fs = std::filesystem;

// Coefficients with distinct powers of ten so that a term read into the wrong slot shows.
constexpr const char* kValid = R"(format = 1
date = "2025-01-01"
[machine]
cpu = "Test CPU"
threads = 2
[coefficients]
overhead_s = 1e-3
per_token_s = 1e-5
per_sampled_token_s = 2e-6
per_attention_pair_s = 3e-9
per_kv_token_s = 4e-8
[model]
layers = 2
hidden = 128
heads = 4
kv_heads = 2
head_dim = 32
vocab = 320
max_model_len = 4096
kv_capacity_tokens = 65536
kv_bytes_per_token = 2048
[fit]
median_relative_error = 0.02
max_relative_error = 0.1
)";

class FittedCostFile : public ::testing::Test {
 protected:
  fs::path write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  // The valid file with `from` replaced by `to` (which may be empty: the line is deleted).
  fs::path write_edited(const std::string& from, const std::string& to) {
    std::string text = kValid;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return write(text);
  }
  void TearDown() override { fs::remove(path_); }

  // Loading must fail with a message that names the file and contains `fragment`.
  void expect_refused(const fs::path& file, const std::string& fragment) {
    try {
      load_fitted_cost(file);
      ADD_FAILURE() << "accepted a file that should fail with '" << fragment << "'";
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(file.string()), std::string::npos) << message;
      EXPECT_NE(message.find(fragment), std::string::npos) << message;
    }
  }

  fs::path path_ =
      fs::temp_directory_path() / ("headway_fitted_cost_" + std::to_string(::getpid()) + ".toml");
};

TEST_F(FittedCostFile, ReadsShapeLimitsAndMachine) {
  const FittedCost cost = load_fitted_cost(write(kValid));
  EXPECT_EQ(cost.model.layers, 2u);
  EXPECT_EQ(cost.model.hidden, 128u);
  EXPECT_EQ(cost.model.heads, 4u);
  EXPECT_EQ(cost.model.kv_heads, 2u);
  EXPECT_EQ(cost.model.head_dim, 32u);
  EXPECT_EQ(cost.model.vocab, 320u);
  EXPECT_EQ(cost.model.max_model_len, 4096u);
  EXPECT_EQ(cost.kv_capacity_tokens, 65536u);
  EXPECT_EQ(cost.kv_bytes_per_token, 2048u);
  EXPECT_EQ(cost.machine, "Test CPU, 2 threads");
}

TEST_F(FittedCostFile, StepTimesFollowTheCoefficients) {
  const FittedCost cost = load_fitted_cost(write(kValid));

  // An empty step pays the overhead only.
  EXPECT_DOUBLE_EQ(cost.step_seconds(StepLoad{}), 1e-3);

  // A 100-token prefill from position 0 that samples: 100 tokens, 1 sample,
  // pairs = 100 * (0 + 101 / 2) = 5050, KV positions 100.
  StepLoad prefill;
  prefill.add(0, 100, true);
  EXPECT_DOUBLE_EQ(prefill.attention_pairs, 5050.0);
  EXPECT_NEAR(cost.step_seconds(prefill), 1e-3 + 100 * 1e-5 + 1 * 2e-6 + 5050 * 3e-9 + 100 * 4e-8,
              1e-15);

  // Four decodes at context 1000 next to a non-sampling 50-token chunk from position 200:
  // tokens 4 + 50, samples 4, pairs 4 * 1001 + 50 * (200 + 25.5) = 15279,
  // KV positions 4 * 1001 + 250 = 4254.
  StepLoad mixed;
  for (int i = 0; i < 4; ++i) mixed.add(1000, 1, true);
  mixed.add(200, 50, false);
  const double expected = 1e-3 + 54 * 1e-5 + 4 * 2e-6 + 15279 * 3e-9 + 4254 * 4e-8;
  EXPECT_NEAR(cost.step_seconds(mixed), expected, 1e-15);
}

TEST_F(FittedCostFile, IntegerCoefficientsAreNumbersToo) {
  const FittedCost cost =
      load_fitted_cost(write_edited("per_kv_token_s = 4e-8", "per_kv_token_s = 0"));
  StepLoad load;
  load.add(0, 10, true);
  EXPECT_NEAR(cost.step_seconds(load), 1e-3 + 10 * 1e-5 + 2e-6 + 55 * 3e-9, 1e-15);
}

TEST_F(FittedCostFile, MissingFileIsRefused) { expect_refused(path_, "cannot open"); }

// A FIFO blocked open() for ever (and /dev/zero read until memory ran out): refused before opening.
TEST_F(FittedCostFile, AFileThatIsNotARegularOneIsRefused) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  expect_refused(path_, "cannot open the cost file: not a regular file");
  expect_refused("/dev/zero", "cannot open the cost file: not a regular file");
}

TEST_F(FittedCostFile, SyntaxErrorNamesTheLine) {
  expect_refused(write_edited("hidden = 128", "hidden = = 128"), ":14:");
}

TEST_F(FittedCostFile, MissingKeysAreNamed) {
  expect_refused(write_edited("per_token_s = 1e-5\n", ""), "coefficients.per_token_s is missing");
  expect_refused(write_edited("max_model_len = 4096\n", ""), "model.max_model_len is missing");
  expect_refused(write_edited("kv_capacity_tokens = 65536\n", ""),
                 "model.kv_capacity_tokens is missing");
  expect_refused(write_edited("format = 1\n", ""), "format is missing");
  expect_refused(write_edited("[coefficients]", "[coefficient]"), "[coefficients] is missing");
}

// From helper-201's review: the cost file was the one TOML file whose unknown keys were ignored,
// so a misspelt coefficient or table went unnoticed.
TEST_F(FittedCostFile, UnknownKeysAreNamedWithTheirLine) {
  expect_refused(
      write_edited("per_kv_token_s = 4e-8\n", "per_kv_token_s = 4e-8\nper_kv_tokens_s = 1\n"),
      "coefficients.per_kv_tokens_s (line 12) is not a key of a cost file's "
      "[coefficients] (known: overhead_s, per_token_s");
  expect_refused(write_edited("layers = 2", "layers = 2\nlayer = 3"),
                 "model.layer (line 14) is not a key of a cost file's [model]");
  expect_refused(write_edited("date = ", "dates = \"x\"\ndate = "),
                 "dates (line 2) is not a key of a cost file (known: format, date");
  expect_refused(write_edited("threads = 2", "threads = 2\ngpu = \"H200\""),
                 "machine.gpu (line 6) is not a key of a cost file's [machine]");
  expect_refused(write(std::string(kValid) + "[fitt]\nx = 1\n"), "fitt (line 25)");
}

TEST_F(FittedCostFile, BadValuesAreNamed) {
  expect_refused(write_edited("per_attention_pair_s = 3e-9", "per_attention_pair_s = -3e-9"),
                 "coefficients.per_attention_pair_s must be a finite number >= 0");
  expect_refused(write_edited("overhead_s = 1e-3", "overhead_s = \"1ms\""),
                 "coefficients.overhead_s must be a number");
  expect_refused(write_edited("layers = 2", "layers = 0"), "model.layers must be in [1, ");
  expect_refused(write_edited("hidden = 128", "hidden = 128.5"), "model.hidden must be an integer");
  expect_refused(write_edited("kv_heads = 2", "kv_heads = 3"), "model.kv_heads must divide");
  expect_refused(write_edited("format = 1", "format = 2"), "format must be 1");
  expect_refused(write_edited("kv_capacity_tokens = 65536", "kv_capacity_tokens = 1000"),
                 "model.kv_capacity_tokens (1000) must be >= model.max_model_len (4096)");
  std::string not_a_table = kValid;
  not_a_table.replace(not_a_table.find("[model]"), 7, "[shape]");
  expect_refused(write("model = 3\n" + not_a_table), "[model] must be a table");
}

}  // namespace
}  // namespace headway::models::sim
