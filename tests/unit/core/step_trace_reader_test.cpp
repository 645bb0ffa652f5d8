// core::read_step_trace, which `headway profile --from-step-trace` fits the cost model from: what
// it keeps of a trace (each engine's steps after the first, as features), and every malformed
// trace refused with the file, the line and what is wrong. The traces are written by hand here;
// the integration test (profile_test) reads ones the engine wrote.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/step_trace_reader.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace headway::core {
namespace {

using ::testing::HasSubstr;

const std::string kModel =
    R"("model":{"plugin":"cpu","layers":2,"hidden":128,"heads":4,"kv_heads":2,"head_dim":32,)"
    R"("vocab":320,"max_model_len":2048,"kv_capacity_tokens":4096,"kv_bytes_per_token":512,)"
    R"("block_size":16})";

std::string model_line(uint32_t engine, const std::string& model = kModel) {
  return "{\"engine\":" + std::to_string(engine) + "," + model + "}\n";
}

// A step whose slices are given as JSON objects.
std::string step_line(uint32_t engine, uint64_t step, double duration, const std::string& slices) {
  return "{\"engine\":" + std::to_string(engine) + ",\"step\":" + std::to_string(step) +
         ",\"t\":1.0,\"duration\":" + std::to_string(duration) + ",\"slices\":[" + slices +
         "],\"preempted\":[]}\n";
}

const std::string kPrefill =
    R"({"request":1,"start":0,"tokens":100,"kind":"prefill","sample":true})";
const std::string kMiddleChunk =
    R"({"request":2,"start":512,"tokens":256,"kind":"prefill","sample":false})";
const std::string kDecode = R"({"request":3,"start":40,"tokens":1,"kind":"decode","sample":true})";

class TraceFile {
 public:
  explicit TraceFile(const std::string& text)
      : path_(std::filesystem::path(::testing::TempDir()) /
              ("step_trace_reader_" + std::to_string(::getpid()) + "_" +
               std::to_string(counter_++) + ".jsonl")) {
    std::ofstream(path_) << text;
  }
  ~TraceFile() { std::filesystem::remove(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

// The message read_step_trace throws for `text`, or "" when it throws nothing.
std::string error_of(const std::string& text, std::optional<uint32_t> engine = std::nullopt) {
  TraceFile file(text);
  try {
    read_step_trace(file.path(), engine);
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr(file.path().string()));
    return message;
  }
  return "";
}

TEST(StepTraceReader, KeepsEachEnginesStepsAfterTheFirstAsFeatures) {
  const TraceFile file(model_line(0) + model_line(1) + step_line(0, 0, 0.5, kPrefill) +
                       step_line(1, 0, 0.5, kPrefill) + step_line(0, 1, 0.02, kDecode) +
                       step_line(0, 2, 0.03, kMiddleChunk + "," + kDecode) +
                       step_line(1, 1, 0.01, "") + step_line(1, 2, 0.04, kPrefill) + "\n");
  const TracedSteps traced = read_step_trace(file.path(), std::nullopt);
  EXPECT_EQ(traced.model.plugin, "cpu");
  EXPECT_EQ(traced.model.info.layers, 2u);
  EXPECT_EQ(traced.model.info.kv_capacity_tokens, 4096u);
  EXPECT_EQ(traced.model.block_size, 16u);
  EXPECT_EQ(traced.engines, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(traced.warmup_steps, 2u);
  EXPECT_EQ(traced.empty_steps, 1u);
  ASSERT_EQ(traced.steps.size(), 3u);

  const ProfileMeasurement& decode = traced.steps[0];
  EXPECT_EQ(decode.shape.label, "e0 s1");
  EXPECT_DOUBLE_EQ(decode.median_s, 0.02);
  EXPECT_EQ(decode.features.tokens, 1);
  EXPECT_EQ(decode.features.sampled, 1);
  EXPECT_EQ(decode.features.kv_tokens, 41);

  // A middle chunk samples nothing; the decode beside it does.
  const ProfileMeasurement& mixed = traced.steps[1];
  EXPECT_EQ(mixed.features.tokens, 257);
  EXPECT_EQ(mixed.features.sampled, 1);
  EXPECT_EQ(mixed.features.kv_tokens, 512 + 256 + 41);
  EXPECT_DOUBLE_EQ(mixed.features.attention_pairs, 256 * (512 + 257 / 2.0) + 1 * (40 + 1));

  EXPECT_EQ(traced.steps[2].shape.label, "e1 s2");
  EXPECT_EQ(traced.steps[2].features.sampled, 1);

  // The range the kept steps cover: two slices at most, 257 tokens, position 768.
  EXPECT_EQ(traced.coverage.max_batch, 2u);
  EXPECT_EQ(traced.coverage.max_step_tokens, 257u);
  EXPECT_EQ(traced.coverage.max_context, 768u);
  EXPECT_EQ(traced.coverage.steps_with_prefill, 2u);
  EXPECT_EQ(traced.runs, 1u);
  EXPECT_FALSE(traced.limits_differ);
  EXPECT_FALSE(traced.dropped_partial_last_line);

  const TracedSteps one = read_step_trace(file.path(), 1);
  EXPECT_EQ(one.engines, (std::vector<uint32_t>{1}));
  ASSERT_EQ(one.steps.size(), 1u);
  EXPECT_EQ(one.steps[0].shape.label, "e1 s2");
}

// `cat a.jsonl b.jsonl`: the second run's model line starts it over, so its first step is warm-up
// too, and its steps are told apart from the first run's.
TEST(StepTraceReader, ConcatenatedRunsEachLoseTheirWarmUpStep) {
  std::string smaller = kModel;  // the second run's KV was sized smaller
  smaller.replace(smaller.find("4096"), 4, "2048");
  const TraceFile file(model_line(0) + step_line(0, 0, 0.5, kPrefill) +
                       step_line(0, 1, 0.02, kDecode) + step_line(0, 2, 0.02, kDecode) +
                       model_line(0, smaller) + step_line(0, 0, 0.7, kPrefill) +
                       step_line(0, 1, 0.03, kDecode));
  const TracedSteps traced = read_step_trace(file.path(), std::nullopt);
  EXPECT_EQ(traced.runs, 2u);
  EXPECT_EQ(traced.warmup_steps, 2u);
  ASSERT_EQ(traced.steps.size(), 3u);
  EXPECT_EQ(traced.steps[1].shape.label, "e0 s2");
  EXPECT_EQ(traced.steps[2].shape.label, "r2 e0 s1");
  EXPECT_DOUBLE_EQ(traced.steps[2].median_s, 0.03);
  // The smaller limit of the two is what both runs had room for.
  EXPECT_TRUE(traced.limits_differ);
  EXPECT_EQ(traced.model.info.kv_capacity_tokens, 2048u);
}

// An engine whose KV holds fewer tokens than its max_model_len could not run longer requests: the
// cost file's max_model_len is the KV capacity then (a sim model refuses it above).
TEST(StepTraceReader, TheKvCapacityBoundsMaxModelLen) {
  std::string small_kv = kModel;
  small_kv.replace(small_kv.find("\"kv_capacity_tokens\":4096"), 25, "\"kv_capacity_tokens\":1024");
  const TraceFile file(model_line(0, small_kv) + step_line(0, 0, 0.5, kPrefill) +
                       step_line(0, 1, 0.02, kDecode));
  const TracedSteps traced = read_step_trace(file.path(), std::nullopt);
  EXPECT_EQ(traced.model.info.max_model_len, 1024u);
  EXPECT_EQ(traced.model.info.kv_capacity_tokens, 1024u);
}

// What a virtual-clock trace or a killed writer leaves is read, not refused: a step that only
// preempted (no forward pass, 0 s) is skipped, and a last line cut short is dropped.
TEST(StepTraceReader, PreemptOnlyStepsAndACutLastLineAreLeftOut) {
  const std::string steps = model_line(0) + step_line(0, 0, 0.5, kPrefill) +
                            step_line(0, 1, 0.0, "") + step_line(0, 2, 0.02, kDecode);
  const TraceFile cut(steps + R"({"engine":0,"step":3,"t":1.0,"dura)");
  const TracedSteps traced = read_step_trace(cut.path(), std::nullopt);
  EXPECT_EQ(traced.empty_steps, 1u);
  EXPECT_TRUE(traced.dropped_partial_last_line);
  ASSERT_EQ(traced.steps.size(), 1u);
  EXPECT_EQ(traced.steps[0].shape.label, "e0 s2");
  // Only the last line: the same half line in the middle is an error.
  EXPECT_THAT(error_of(model_line(0) + R"({"engine":0,"step":3,"t":1.0,"dura)" + "\n" + steps),
              HasSubstr(":2: not a JSON object"));
}

TEST(StepTraceReader, MalformedTracesAreRefusedWithTheLine) {
  const std::string head = model_line(0) + step_line(0, 0, 0.5, kPrefill);
  EXPECT_THAT(error_of(head + "not json\n"), HasSubstr(":3: not a JSON object"));
  EXPECT_THAT(error_of(head + step_line(0, 1, 0.1,
                                        R"({"request":1,"start":0,"tokens":1,"kind":"decode"})")),
              HasSubstr(":3: 'sample' is missing"));
  EXPECT_THAT(error_of(head + step_line(0, 1, 0.0, kDecode)),
              HasSubstr(":3: 'duration' must be a number of seconds above 0"));
  EXPECT_THAT(error_of(head + R"({"engine":0,"step":1,"duration":0.1})" + "\n"),
              HasSubstr(":3: 'slices' is missing"));
  EXPECT_THAT(
      error_of(head + step_line(0, 1, 0.1, R"({"request":1,"start":-4,"tokens":1,"sample":true})")),
      HasSubstr(":3: 'start' must be a non-negative integer"));
  EXPECT_THAT(error_of(R"({"engine":0,"model":{"plugin":"cpu","layers":2}})"
                       "\n"),
              HasSubstr(":1: 'hidden' is missing"));
  // What a sim model would refuse, refused at the line: a zero size, heads kv_heads cannot
  // divide, a slice of nothing, a slice past the engine's max_model_len (2048 here).
  std::string zero_layers = kModel;
  zero_layers.replace(zero_layers.find("\"layers\":2"), 10, "\"layers\":0");
  EXPECT_THAT(error_of(model_line(0, zero_layers)),
              HasSubstr(":1: model.layers must be at least 1"));
  std::string odd_heads = kModel;
  odd_heads.replace(odd_heads.find("\"kv_heads\":2"), 12, "\"kv_heads\":3");
  EXPECT_THAT(error_of(model_line(0, odd_heads)),
              HasSubstr(":1: model.kv_heads (3) must divide model.heads (4)"));
  EXPECT_THAT(
      error_of(head + step_line(0, 1, 0.1, R"({"request":1,"start":5,"tokens":0,"sample":true})")),
      HasSubstr(":3: a slice of 0 tokens"));
  EXPECT_THAT(
      error_of(head + step_line(0, 1, 0.1,
                                R"({"request":1,"start":4294967000,"tokens":1000,"sample":true})")),
      HasSubstr(":3: a slice reaches position 4294968000, past its engine's max_model_len 2048"));
  EXPECT_THAT(error_of(head + "{\"engine\":" + std::string(1'000'000, '[') +
                       std::string(1'000'000, ']') + "}\n"),
              HasSubstr(":3: objects and arrays nest more than 128 levels deep"));
}

// From helper-201's review: the step's tokens (a sum of slices up to 2^32 - 1 each) were cast to
// 32 bits, undefined past them.
TEST(StepTraceReader, AStepPast32BitsOfTokensIsCountedWhole) {
  std::string wide = kModel;
  wide.replace(wide.find("\"max_model_len\":2048"), 20, "\"max_model_len\":4294967295");
  wide.replace(wide.find("\"kv_capacity_tokens\":4096"), 25, "\"kv_capacity_tokens\":4294967295");
  const std::string slice =
      R"({"request":1,"start":0,"tokens":3000000000,"kind":"prefill","sample":true})";
  TraceFile file(model_line(0, wide) + step_line(0, 0, 0.5, kPrefill) +
                 step_line(0, 1, 0.5, slice + "," + slice) + step_line(0, 2, 0.1, kDecode));
  const TracedSteps traced = read_step_trace(file.path(), std::nullopt);
  EXPECT_EQ(traced.coverage.max_step_tokens, 6'000'000'000u);
}

TEST(StepTraceReader, TracesItCannotFitFromAreRefused) {
  // A trace of an older Headway: steps, no model line.
  EXPECT_THAT(error_of(step_line(0, 0, 0.5, kPrefill)),
              HasSubstr(":1: a step of engine 0 before its model line"));
  // Two engines of different shapes cannot be one sim model; one of them can.
  std::string other = kModel;
  other.replace(other.find("\"layers\":2"), 10, "\"layers\":3");
  const std::string two = model_line(0) + model_line(1, other) + step_line(0, 0, 0.5, kPrefill) +
                          step_line(0, 1, 0.1, kDecode) + step_line(1, 0, 0.5, kPrefill) +
                          step_line(1, 1, 0.1, kDecode);
  EXPECT_THAT(error_of(two), HasSubstr(":2: engine 1 ran another model than engine 0"));
  EXPECT_THAT(error_of(two), HasSubstr("--engine"));
  EXPECT_EQ(error_of(two, 1), "");
  EXPECT_THAT(error_of(two, 2), HasSubstr("the trace has no engine 2"));
  // Nothing left once the warm-up steps are out.
  EXPECT_THAT(
      error_of(model_line(0) + step_line(0, 0, 0.5, kPrefill)),
      HasSubstr("no step to fit (each engine's first step is left out as warm-up: 1 in all"));
  EXPECT_THAT(error_of(""), HasSubstr("names no engine"));
  EXPECT_THAT(error_of("{}\n"), HasSubstr(":1: 'engine' is missing"));
  try {
    read_step_trace("/nonexistent/steps.jsonl", std::nullopt);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/steps.jsonl: cannot open the step trace"));
  }
  // A FIFO blocked open() for ever, /dev/zero read until memory ran out: refused before opening.
  const std::filesystem::path fifo =
      std::filesystem::temp_directory_path() / ("steps_fifo_" + std::to_string(::getpid()));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::filesystem::path& file : {fifo, std::filesystem::path("/dev/zero")}) {
    try {
      read_step_trace(file, std::nullopt);
      ADD_FAILURE() << "no error for " << file;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(file.string() + ": cannot open the step trace (not a "
                                                      "regular file)"));
    }
  }
  std::filesystem::remove(fifo);
}

}  // namespace
}  // namespace headway::core
