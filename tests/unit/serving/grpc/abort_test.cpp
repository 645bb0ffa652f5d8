// Abort, client cancellation and disconnects: every way a stream ends early must reach
// GenerationService::abort().
#include <gtest/gtest.h>

#include "frontend_fixture.h"

namespace headway::serving::testing {
namespace {

using AbortTest = FrontendFixture;

v1::GenerateRequest running_request(const std::string& id) {
  v1::GenerateRequest request;
  request.set_request_id(id);
  request.set_text("a long story");
  return request;
}

TEST_F(AbortTest, AbortEndsARunningStreamWithFinishReasonAbort) {
  fake_.set_script({.tokens = {72}, .finish = Finish::kNone});
  grpc::ClientContext stream_context;
  auto reader = stub_->Generate(&stream_context, running_request("r-abort"));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));  // the request is running
  EXPECT_EQ(response.text_delta(), "H");

  grpc::ClientContext abort_context;
  v1::AbortRequest abort;
  abort.set_request_id("r-abort");
  v1::AbortResponse aborted;
  ASSERT_TRUE(stub_->Abort(&abort_context, abort, &aborted).ok());
  EXPECT_TRUE(aborted.found());

  v1::GenerateResponse last;
  while (reader->Read(&response)) last = response;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(last.finish_reason(), "abort");
  EXPECT_EQ(last.usage().completion_tokens(), 1u);
}

TEST_F(AbortTest, AbortOfAnUnknownRequestSaysNotFound) {
  grpc::ClientContext context;
  v1::AbortRequest abort;
  abort.set_request_id("never-submitted");
  v1::AbortResponse aborted;
  ASSERT_TRUE(stub_->Abort(&context, abort, &aborted).ok());
  EXPECT_FALSE(aborted.found());
  EXPECT_EQ(fake_.aborted(), std::vector<std::string>{"never-submitted"});
}

TEST_F(AbortTest, AbortWithoutARequestIdIsAnInvalidArgumentNamingIt) {
  grpc::ClientContext context;
  v1::AbortResponse aborted;
  const grpc::Status status = stub_->Abort(&context, v1::AbortRequest{}, &aborted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message().rfind("request_id: ", 0), 0u) << status.error_message();
  const auto param = context.GetServerTrailingMetadata().find("headway-error-param");
  ASSERT_NE(param, context.GetServerTrailingMetadata().end());
  EXPECT_EQ(std::string(param->second.data(), param->second.size()), "request_id");
  EXPECT_TRUE(fake_.aborted().empty());
  // An id no request can have (longer than Generate takes) is refused as Generate refuses it.
  grpc::ClientContext long_context;
  v1::AbortRequest too_long;
  too_long.set_request_id(std::string(300, 'x'));
  const grpc::Status refused = stub_->Abort(&long_context, too_long, &aborted);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("at most 256 characters"), std::string::npos)
      << refused.error_message();
  EXPECT_TRUE(fake_.aborted().empty());
}

TEST_F(AbortTest, AClientThatCancelsAStreamingRequestAbortsIt) {
  fake_.set_script({.tokens = {72}, .finish = Finish::kNone});
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, running_request("r-cancel"));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  context.TryCancel();
  EXPECT_TRUE(fake_.wait_for_abort("r-cancel"));
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// A client that gave a request up (Abort) and sent it again under the same id at once: the old
// call's handler, noticing the old call's cancellation only then, aborts the old request and never
// the retry that now has its id.
TEST_F(AbortTest, ACancelledCallsHandlerLeavesARetryUnderItsIdRunning) {
  fake_.set_script({.tokens = {72}, .finish = Finish::kNone});
  grpc::ClientContext first_context;
  auto first = stub_->Generate(&first_context, running_request("r-retried"));
  v1::GenerateResponse response;
  ASSERT_TRUE(first->Read(&response));
  fake_.free_id("r-retried");  // as the Abort did; the old request has not ended yet

  grpc::ClientContext retry_context;
  auto retry = stub_->Generate(&retry_context, running_request("r-retried"));
  ASSERT_TRUE(retry->Read(&response));  // the retry runs
  first_context.TryCancel();
  EXPECT_TRUE(fake_.wait_for_abort("r-retried"));
  while (first->Read(&response)) {
  }
  EXPECT_EQ(first->Finish().error_code(), grpc::StatusCode::CANCELLED);

  fake_.finish("r-retried", Finish::kLength);
  v1::GenerateResponse last;
  while (retry->Read(&response)) last = response;
  EXPECT_TRUE(retry->Finish().ok());
  EXPECT_EQ(last.finish_reason(), "length");
}

TEST_F(AbortTest, AClientThatCancelsBeforeTheFirstTokenAbortsTheQueuedRequest) {
  fake_.set_script({.finish = Finish::kNone});  // queued: no token ever comes
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, running_request("r-queued"));
  ASSERT_EQ(fake_.wait_for_submitted(1).size(), 1u);
  context.TryCancel();
  EXPECT_TRUE(fake_.wait_for_abort("r-queued"));
  v1::GenerateResponse response;
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(AbortTest, AClientDeadlineThatPassesAbortsTheRequest) {
  fake_.set_script({.finish = Finish::kNone});
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  auto reader = stub_->Generate(&context, running_request("r-deadline"));
  // On a machine so loaded that the call expired before its handler ran, nothing was queued and
  // there is nothing to check.
  if (fake_.wait_for_submitted(1).empty())
    GTEST_SKIP() << "the deadline passed before Generate ran";
  EXPECT_TRUE(fake_.wait_for_abort("r-deadline"));
  v1::GenerateResponse response;
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(AbortTest, ARequestThatFinishedNormallyIsNotAborted) {
  fake_.set_script({.tokens = {72, 105}, .finish = Finish::kLength});
  ASSERT_TRUE(generate(running_request("r-done")).status.ok());
  EXPECT_TRUE(fake_.aborted().empty());
}

}  // namespace
}  // namespace headway::serving::testing
