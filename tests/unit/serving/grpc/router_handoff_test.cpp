// A router process (RemoteGenerationService) in front of a prefill and a decode engine process,
// each a fake service behind a real gRPC frontend: what the router makes of a hand-off it cannot
// continue. The fakes answer as scripted, so the hand-off is whatever the test says.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/serving/grpc_frontend.h>
#include <headway/serving/remote_generation_service.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "../../test_support/built_plugins.h"
#include "../../test_support/tiny_checkpoint_dir.h"
#include "fake_generation_service.h"

namespace headway::serving::testing {
namespace {

class RouterHandOff : public ::testing::Test {
 protected:
  void SetUp() override {
    for (FakeGenerationService* fake : {&prefill_fake_, &decode_fake_}) {
      fake->set_model(ModelSummary{"tiny", 1024, 320, "byte"});
    }
    GrpcOptions options;
    options.port = 0;
    prefill_ = std::make_unique<GrpcFrontend>(prefill_fake_, options);
    decode_ = std::make_unique<GrpcFrontend>(decode_fake_, options);
    prefill_->start();
    decode_->start();
    const headway::test::TinyCheckpoint& checkpoint = headway::test::shared_tiny_checkpoint();
    const std::string text =
        "[model]\nplugin = \"cpu\"\noptions = { path = \"tiny\" }\n"
        "[[engines]]\nrole = \"prefill\"\naddress = \"127.0.0.1:" +
        std::to_string(prefill_->port()) +
        "\"\n[[engines]]\nrole = \"decode\"\naddress = \"127.0.0.1:" +
        std::to_string(decode_->port()) +
        "\"\n[router]\nplugin = \"disaggregated\"\n[server]\nrole = \"router\"\n";
    RemoteServiceOptions remote;
    remote.connect_timeout_s = 30;
    router_ = std::make_unique<RemoteGenerationService>(
        core::parse_deployment(text, checkpoint.path / "router.toml",
                               headway::test::built_plugins()),
        remote);
  }
  void TearDown() override {
    router_.reset();
    prefill_->stop();
    decode_->stop();
  }

  // The prefill process answers "hello" with `tokens` and a hand-off to `stage_name`; returns the
  // error the client's stream ended with (empty when it did not end in an error).
  std::string hand_off(std::vector<int32_t> tokens, const std::string& stage_name) {
    FakeGenerationService::Script script;
    script.tokens = std::move(tokens);
    script.finish = Finish::kHandoff;
    script.kv_stage = KvStage{stage_name, 6, 1, 1024, 16};
    prefill_fake_.set_script(script);
    GenerateInput input;
    input.prompt_kind = GenerateInput::PromptKind::kText;
    input.prompt_text = "hello";
    input.max_tokens = 4;
    const std::shared_ptr<RequestStream> stream = router_->submit(input);
    StreamChunk chunk;
    const auto give_up = std::chrono::steady_clock::now() + kWaitGuard;
    while (std::chrono::steady_clock::now() < give_up) {
      if (!stream->next(chunk, std::chrono::milliseconds(100))) continue;
      if (chunk.finish == Finish::kNone) continue;
      return chunk.finish == Finish::kError ? chunk.error : std::string();
    }
    ADD_FAILURE() << "the stream never ended";
    return "";
  }

  static bool exists(const std::string& shm_name) {
    return std::filesystem::exists("/dev/shm" + shm_name);
  }

  FakeGenerationService prefill_fake_;
  FakeGenerationService decode_fake_;
  std::unique_ptr<GrpcFrontend> prefill_;
  std::unique_ptr<GrpcFrontend> decode_;
  std::unique_ptr<RemoteGenerationService> router_;
};

// From helper-203's review: the router removed whatever shared-memory object a prefill process
// named in its hand-off (any of its user's), and tried to continue it. Now the request fails
// naming the process and the name, and the object stays.
TEST_F(RouterHandOff, AHandOffUnderAnotherNameFailsTheRequestAndRemovesNothing) {
  const std::string other = "/headway-test-other-" + std::to_string(::getpid());
  const int fd = ::shm_open(other.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ::close(fd);
  const std::string error = hand_off({65}, other);
  EXPECT_NE(error.find("engine0 at 127.0.0.1:" + std::to_string(prefill_->port()) +
                       " handed the request off with its KV under the name \"" + other +
                       "\", which is not a staged KV's"),
            std::string::npos)
      << error;
  EXPECT_TRUE(exists(other));
  ::shm_unlink(other.c_str());
  EXPECT_TRUE(decode_fake_.submitted().empty());
}

// A hand-off before the first token was continued without one, and the decode process's refusal
// ("generated_ids: 0 tokens") reached the client as its own request's fault (400). It is the
// prefill process's: an error naming it, and the stage it left is removed.
TEST_F(RouterHandOff, AHandOffBeforeTheFirstTokenFailsNamingTheProcess) {
  const std::string stage = "/headway-kv-test-" + std::to_string(::getpid());
  const int fd = ::shm_open(stage.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ::close(fd);
  const std::string error = hand_off({}, stage);
  EXPECT_NE(error.find("engine0 at 127.0.0.1:" + std::to_string(prefill_->port()) +
                       " handed the request off before its first token"),
            std::string::npos)
      << error;
  EXPECT_FALSE(exists(stage));
  EXPECT_TRUE(decode_fake_.submitted().empty());
}

// The router frees an aborted request's id at once, as an engine does. Aborting the old request's
// stream then must not cancel a new request under the same id (a frontend's handler that noticed
// its client's cancellation late does that).
TEST_F(RouterHandOff, AnAbortOfAnOldStreamLeavesTheRequestNowUnderItsId) {
  prefill_fake_.set_script({.tokens = {65}, .finish = Finish::kNone});
  GenerateInput input;
  input.prompt_kind = GenerateInput::PromptKind::kText;
  input.prompt_text = "hello";
  input.max_tokens = 4;
  input.request_id = "again";
  const std::shared_ptr<RequestStream> old = router_->submit(input);
  ASSERT_TRUE(router_->abort("again"));
  const std::shared_ptr<RequestStream> retry = router_->submit(input);
  EXPECT_FALSE(router_->abort(*old));
  EXPECT_TRUE(router_->abort(*retry));
  EXPECT_FALSE(router_->abort("again"));
}

}  // namespace
}  // namespace headway::serving::testing
