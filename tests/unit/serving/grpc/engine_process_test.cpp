// A router process's view of one engine process (EngineProcess, core/serving/remote) polled over
// gRPC: here against the fake service behind a real frontend, which the test changes between
// polls as a restarted process would answer.
#include "engine_process.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "frontend_fixture.h"

namespace headway::serving::testing {
namespace {

using namespace std::chrono_literals;

class EngineProcessPolls : public FrontendFixture {
 protected:
  EngineProcess process() const {
    return EngineProcess(0, "", HW_ENGINE_ROLE_MIXED,
                         "127.0.0.1:" + std::to_string(frontend_->port()), "");
  }
  // What answers at the address: a process of `incarnation` serving `max_model_len`.
  void serve(uint64_t incarnation, uint32_t max_model_len) {
    ModelSummary model{"fake-model", max_model_len, 256, "byte"};
    fake_.set_model(model);
    ClusterSummary cluster{"fake-deployment", "single", {EngineSummary{}}};
    cluster.incarnation = incarnation;
    fake_.set_cluster(cluster);
  }
};

// From helper-203's review: the model was read again only after a poll found the process down, so
// a process restarted between two polls that both answered (with another max_model_len, another
// checkpoint) was taken for the one before.
TEST_F(EngineProcessPolls, AProcessRestartedBetweenTwoPollsHasItsModelReadAgain) {
  EngineProcess engine = process();
  serve(11, 256);
  ASSERT_TRUE(engine.poll(5000ms)) << engine.down_reason();
  ASSERT_TRUE(engine.model().has_value());
  EXPECT_EQ(engine.model()->max_model_len, 256u);
  serve(11, 64);  // the same process: its model is not asked again
  ASSERT_TRUE(engine.poll(5000ms));
  EXPECT_EQ(engine.model()->max_model_len, 256u);
  serve(12, 64);  // another one at the address
  ASSERT_TRUE(engine.poll(5000ms));
  EXPECT_EQ(engine.model()->max_model_len, 64u);
}

}  // namespace
}  // namespace headway::serving::testing
