#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/record_memory.h>

#include <string>

namespace headway::core {
namespace {

Workload workload_of(size_t requests, uint32_t output_tokens) {
  Workload w;
  w.source = "big.toml";
  for (size_t i = 0; i < requests; ++i) {
    WorkloadRequest r{};
    r.id = i;
    r.prompt_tokens = 100;
    r.output_tokens = output_tokens;
    w.requests.push_back(r);
  }
  return w;
}

TEST(RecordMemory, TheEstimateGrowsWithOutputTokensNotOnlyRequests) {
  const uint64_t short_outputs = estimated_record_bytes(workload_of(1000, 10));
  const uint64_t long_outputs = estimated_record_bytes(workload_of(1000, 1000));
  EXPECT_GT(short_outputs, 0u);
  // Every token's time is kept: 100 times the tokens take many times the memory.
  EXPECT_GT(long_outputs, 20 * short_outputs);
  EXPECT_EQ(estimated_record_bytes(workload_of(2000, 1000)), 2 * long_outputs);
  EXPECT_EQ(estimated_record_bytes(Workload{}), 0u);
}

TEST(RecordMemory, ARunThatCannotFitIsRefusedNamingTheWorkloadAndTheSizes) {
  const Workload w = workload_of(3000, 200);
  const uint64_t needed = estimated_record_bytes(w);
  EXPECT_NO_THROW(check_record_memory(w, needed, needed));
  EXPECT_NO_THROW(check_record_memory(w, needed, 0));  // the system did not say: no check
  try {
    check_record_memory(w, needed, needed / 2);
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("big.toml"), std::string::npos) << message;
    EXPECT_NE(message.find("3000 requests"), std::string::npos) << message;
    EXPECT_NE(message.find("600000 output tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("--num-requests"), std::string::npos) << message;
  }
}

TEST(RecordMemory, TheMemoryLimitIsKnownOnLinux) { EXPECT_GT(memory_limit_bytes(), 0u); }

}  // namespace
}  // namespace headway::core
