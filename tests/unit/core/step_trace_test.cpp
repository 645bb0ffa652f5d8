// core::StepTraceWriter, which `simulate --step-trace` and every engine driver of `serve
// --step-trace` write through: lines stay whole when several threads write, and a write that
// fails is reported once, naming the file, after which the writer stays quiet.
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/step_trace.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace headway::core {
namespace {

StepDetail decode_step(uint64_t index, uint32_t batch) {
  StepDetail step;
  step.step = index;
  step.start = 0.001 * static_cast<double>(index);
  step.duration = 0.0005;
  for (uint32_t i = 0; i < batch; ++i) {
    step.slices.push_back(hw_slice{i, 100 + i, 1});
    step.slice_is_decode.push_back(1);
    step.slice_samples.push_back(1);
  }
  step.decode_tokens = batch;
  return step;
}

TEST(StepTraceWriter, LinesOfSeveralThreadsStayWhole) {
  const std::filesystem::path file = std::filesystem::path(::testing::TempDir()) /
                                     ("step_trace_" + std::to_string(::getpid()) + ".jsonl");
  constexpr uint32_t kThreads = 4, kSteps = 500;
  {
    StepTraceWriter writer(file);
    std::vector<std::thread> threads;
    for (uint32_t engine = 0; engine < kThreads; ++engine) {
      threads.emplace_back([&writer, engine] {
        for (uint32_t s = 0; s < kSteps; ++s) writer.write(engine, decode_step(s, 1 + s % 40));
      });
    }
    for (std::thread& t : threads) t.join();
  }
  std::ifstream in(file);
  std::vector<uint32_t> next_step(kThreads, 0);
  uint32_t lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const nlohmann::json step = nlohmann::json::parse(line);  // throws on a torn line
    const auto engine = step.at("engine").get<uint32_t>();
    ASSERT_LT(engine, kThreads);
    // Each engine's lines in the order it wrote them, each with the slices it gave.
    EXPECT_EQ(step.at("step").get<uint32_t>(), next_step[engine]);
    EXPECT_EQ(step.at("slices").size(), 1 + next_step[engine] % 40);
    ++next_step[engine];
  }
  EXPECT_EQ(lines, kThreads * kSteps);
  std::filesystem::remove(file);
}

TEST(StepTraceWriter, AFailedWriteIsReportedOnceNamingTheFile) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  StepTraceWriter writer("/dev/full");  // every write fails with ENOSPC once the buffer flushes
  int failures = 0;
  for (uint64_t s = 0; s < 10000; ++s) {
    try {
      writer.write(0, decode_step(s, 8));
    } catch (const Error& e) {
      ++failures;
      const std::string message = e.what();
      EXPECT_NE(message.find("/dev/full"), std::string::npos) << message;
      EXPECT_NE(message.find("writing the step trace failed"), std::string::npos) << message;
    }
  }
  EXPECT_EQ(failures, 1);
}

// A short trace fits in the C library's buffer: a full disk shows only when it is written out at
// the end, which close() reports (`simulate --step-trace` then fails instead of saying "written").
TEST(StepTraceWriter, AFailureAtTheEndIsReportedByClose) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  StepTraceWriter writer("/dev/full");
  writer.write(0, decode_step(0, 2));  // buffered: no error yet
  try {
    writer.close();
    ADD_FAILURE() << "close() reported nothing";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full: writing the end of the step trace failed"),
              std::string::npos)
        << e.what();
  }
  writer.write(0, decode_step(1, 2));  // closed: nothing, no crash
  EXPECT_NO_THROW(writer.close());
}

}  // namespace
}  // namespace headway::core
