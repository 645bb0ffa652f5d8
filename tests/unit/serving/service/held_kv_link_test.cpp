// Disaggregation across processes over peer links ([server] kv_handoff = "link"), both engine
// processes' services in this test process: the prefill process keeps a prefilled request's KV in
// its engine, and the decode process pulls it into its own blocks over a link of their KV
// transports — the path of NCCL between the GPUs of two processes. Here the transport is
// test_socket_peers (host memory over loopback TCP, matched in posting order as NCCL is), and the
// services reach each other through LoopbackPeers instead of gRPC. The greedy tokens must be those
// of one mixed engine, and the prefill engine must get every block back.
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/serving/local_generation_service.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loopback_peers.h"
#include "service_fixture.h"

namespace headway::serving {
namespace {

using test::collect;
using test::handoff_prompts;
using test::LoopbackPeers;
using test::prefill_only;
using test::text_request;
using test::tiny_deployment;
using test::TinyCheckpoint;
using test::with_peers;

const std::string kEngine =
    "[[engines]]\nscheduler = { plugin = \"chunked\", options = { max_num_batched_tokens = 64, "
    "max_num_seqs = 16 } }\n";

TinyCheckpoint& checkpoint() { return test::shared_tiny_checkpoint(); }

std::string peers_transport() {
  return "[kv_transport]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
         "/test_socket_peers.so\"\n";
}

// host_copy's peer links: rings in shared memory (the path of KV between processes on one host).
const std::string kSharedMemoryLinks = "[kv_transport]\nplugin = \"host_copy\"\n";

// A transport without peer links.
std::string linkless_transport() {
  return "[kv_transport]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
         "/test_failing_transport.so\"\n";
}

// An engine process that holds its prefilled KV for links (hold_s: how long).
core::DeploymentConfig holding_process(double hold_s = 30.0, const std::string& engine = kEngine,
                                       const std::string& transport = peers_transport()) {
  return tiny_deployment(checkpoint(), engine,
                         "[server]\nrole = \"engine\"\nkv_handoff = \"link\"\nkv_link_hold_s = " +
                             std::to_string(hold_s) + "\n" + transport);
}

core::DeploymentConfig pulling_process(const std::string& transport = peers_transport(),
                                       const std::string& engine = kEngine) {
  return tiny_deployment(checkpoint(), engine, "[server]\nrole = \"engine\"\n" + transport);
}

// The continuation a router sends to the decode process (it sets the source address).
GenerateInput continuation(const std::string& prompt, uint32_t max_tokens,
                           const test::Collected& from, const std::string& source = "prefill") {
  GenerateInput input = text_request(prompt, max_tokens);
  input.kv_source = from.kv_stage;
  input.kv_source->source_address = source;
  input.generated_ids = from.ids;
  return input;
}

// Waits (bounded, for a broken service not to hang the run) until the service's engine has every
// KV block free again; returns whether it did.
bool all_blocks_free(const LocalGenerationService& service) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    const EngineSummary engine = service.cluster_info().engines.at(0);
    if (engine.kv_blocks_free == engine.kv_blocks_total) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::vector<std::vector<int32_t>> mixed_engine_tokens(const std::vector<std::string>& texts,
                                                      uint32_t max_tokens) {
  LocalGenerationService mixed(tiny_deployment(checkpoint(), kEngine));
  std::vector<std::vector<int32_t>> tokens;
  for (const std::string& text : texts) {
    tokens.push_back(collect(*mixed.submit(text_request(text, max_tokens))).ids);
  }
  return tokens;
}

// Both processes' [kv_transport] is `transport`.
void expect_greedy_tokens_of_one_mixed_engine(const std::string& transport) {
  const std::vector<std::vector<int32_t>> expected = mixed_engine_tokens(handoff_prompts(), 12);
  auto peers = std::make_shared<LoopbackPeers>();
  LocalGenerationService prefill(holding_process(30.0, kEngine, transport));
  LocalGenerationService decode(pulling_process(transport), with_peers(peers));
  peers->add("prefill", &prefill);
  for (size_t i = 0; i < handoff_prompts().size(); ++i) {
    SCOPED_TRACE(i);
    const test::Collected first = prefill_only(prefill, handoff_prompts()[i], 12);
    ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
    ASSERT_TRUE(first.kv_stage.has_value());
    EXPECT_TRUE(first.kv_stage->held);
    const test::Collected rest =
        collect(*decode.submit(continuation(handoff_prompts()[i], 12, first)));
    EXPECT_EQ(rest.finish, Finish::kLength) << rest.error;
    std::vector<int32_t> got = first.ids;
    got.insert(got.end(), rest.ids.begin(), rest.ids.end());
    EXPECT_EQ(got, expected[i]);
    EXPECT_GT(rest.timings.kv_transfer_seconds, 0.0);  // pulled, not prefilled again
  }
  EXPECT_TRUE(all_blocks_free(prefill));  // every send over, every held block freed
  EXPECT_TRUE(all_blocks_free(decode));
  EXPECT_EQ(peers->sends(), 4);
}

TEST(HeldKvLinkTest, GreedyTokensEqualThoseOfOneMixedEngine) {
  expect_greedy_tokens_of_one_mixed_engine(peers_transport());
}

TEST(HeldKvLinkTest, OverSharedMemoryLinksGreedyTokensEqualThoseOfOneMixedEngine) {
  expect_greedy_tokens_of_one_mixed_engine(kSharedMemoryLinks);
}

// Many continuations at once through one link: sends and receives are matched in posting order,
// so a pull that overtook another would receive the other request's KV (and wrong tokens).
void expect_concurrent_pulls_to_get_their_own_kv(const std::string& transport) {
  std::vector<std::string> texts;
  for (int i = 0; i < 12; ++i) texts.push_back(std::string(20 + 23 * i, 'a' + i));
  const std::vector<std::vector<int32_t>> expected = mixed_engine_tokens(texts, 6);
  auto peers = std::make_shared<LoopbackPeers>();
  LocalGenerationService prefill(holding_process(30.0, kEngine, transport));
  LocalGenerationService decode(pulling_process(transport), with_peers(peers));
  peers->add("prefill", &prefill);
  std::vector<test::Collected> firsts;
  for (const std::string& text : texts) {
    firsts.push_back(prefill_only(prefill, text, 6));
    ASSERT_EQ(firsts.back().finish, Finish::kHandoff) << firsts.back().error;
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < texts.size(); ++i) {
    streams.push_back(decode.submit(continuation(texts[i], 6, firsts[i])));
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE(i);
    const test::Collected rest = collect(*streams[i]);
    EXPECT_EQ(rest.finish, Finish::kLength) << rest.error;
    EXPECT_GT(rest.timings.kv_transfer_seconds, 0.0);
    std::vector<int32_t> got = firsts[i].ids;
    got.insert(got.end(), rest.ids.begin(), rest.ids.end());
    EXPECT_EQ(got, expected[i]);
  }
  EXPECT_TRUE(all_blocks_free(prefill));
}

TEST(HeldKvLinkTest, ConcurrentPullsOverOneLinkEachGetTheirOwnKv) {
  expect_concurrent_pulls_to_get_their_own_kv(peers_transport());
}

TEST(HeldKvLinkTest, OverSharedMemoryLinksConcurrentPullsEachGetTheirOwnKv) {
  expect_concurrent_pulls_to_get_their_own_kv(kSharedMemoryLinks);
}

// KV not pulled within its hold time is freed; its request is prefilled on the decode process,
// with the same tokens, and the link still serves the next pull.
TEST(HeldKvLinkTest, HeldKvThatExpiredIsPrefilledInstead) {
  auto peers = std::make_shared<LoopbackPeers>();
  LocalGenerationService prefill(holding_process(/*hold_s=*/0.05));
  LocalGenerationService decode(pulling_process(), with_peers(peers));
  peers->add("prefill", &prefill);
  const std::string prompt(100, 'w');
  const test::Collected expired = prefill_only(prefill, prompt, 8);
  ASSERT_EQ(expired.finish, Finish::kHandoff) << expired.error;
  EXPECT_TRUE(all_blocks_free(prefill));  // its hold time passed: freed without a pull
  const test::Collected prefilled_here = collect(*decode.submit(continuation(prompt, 8, expired)));
  EXPECT_EQ(prefilled_here.finish, Finish::kLength) << prefilled_here.error;
  EXPECT_EQ(prefilled_here.timings.kv_transfer_seconds, 0.0);
  // The next one is pulled before it expires (at most a few steps later).
  GenerateInput input = text_request(prompt, 8);
  input.prefill_only = true;
  auto fresh_stream = prefill.submit(input);
  const test::Collected fresh = collect(*fresh_stream);
  ASSERT_EQ(fresh.finish, Finish::kHandoff) << fresh.error;
  const test::Collected moved = collect(*decode.submit(continuation(prompt, 8, fresh)));
  EXPECT_EQ(moved.finish, Finish::kLength) << moved.error;
  EXPECT_EQ(prefilled_here.ids, moved.ids);
  EXPECT_TRUE(all_blocks_free(prefill));
}

// A decode process that cannot use the held KV (its blocks hold another number of tokens) tells
// the holder to drop it at once, instead of leaving it held until it expires, and prefills.
TEST(HeldKvLinkTest, KvThatCannotBeUsedIsDroppedAtOnce) {
  const std::string other_blocks =
      "[[engines]]\nblock_size = 32\nscheduler = { plugin = \"chunked\", options = { "
      "max_num_batched_tokens = 64, max_num_seqs = 16 } }\n";
  auto peers = std::make_shared<LoopbackPeers>();
  LocalGenerationService prefill(holding_process(/*hold_s=*/3600.0));
  LocalGenerationService decode(pulling_process(peers_transport(), other_blocks),
                                with_peers(peers));
  peers->add("prefill", &prefill);
  const std::string prompt(70, 'd');
  const test::Collected first = prefill_only(prefill, prompt, 8);
  ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
  const test::Collected rest = collect(*decode.submit(continuation(prompt, 8, first)));
  EXPECT_EQ(rest.finish, Finish::kLength) << rest.error;
  EXPECT_EQ(rest.timings.kv_transfer_seconds, 0.0);
  EXPECT_TRUE(all_blocks_free(prefill));  // dropped: an hour's hold did not keep it
}

// The holder is gone (shut down, crashed) before the pull: the request is prefilled on the decode
// process; a decode process whose transport has no peer links prefills, too.
TEST(HeldKvLinkTest, AHolderThatIsGoneOrATransportWithoutLinksMeansAPrefill) {
  auto peers = std::make_shared<LoopbackPeers>();
  const std::string prompt(40, 'g');
  test::Collected first;
  {
    LocalGenerationService prefill(holding_process());
    first = prefill_only(prefill, prompt, 8);
    ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
  }
  LocalGenerationService decode(pulling_process(), with_peers(peers));
  // Several at once: those queued behind the first are declined as soon as its link fails.
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(decode.submit(continuation(prompt, 8, first)));
  std::vector<test::Collected> results;
  for (auto& stream : streams) results.push_back(collect(*stream));
  const test::Collected& gone = results[0];
  for (const test::Collected& result : results) {
    EXPECT_EQ(result.finish, Finish::kLength) << result.error;
    EXPECT_EQ(result.timings.kv_transfer_seconds, 0.0);
    EXPECT_EQ(result.ids, gone.ids);
  }

  LocalGenerationService prefill(holding_process());
  LocalGenerationService no_links(pulling_process(linkless_transport()), with_peers(peers));
  peers->add("prefill", &prefill);
  const test::Collected held = prefill_only(prefill, prompt, 8);
  ASSERT_EQ(held.finish, Finish::kHandoff) << held.error;
  const test::Collected here = collect(*no_links.submit(continuation(prompt, 8, held)));
  EXPECT_EQ(here.finish, Finish::kLength) << here.error;
  EXPECT_EQ(here.timings.kv_transfer_seconds, 0.0);
  EXPECT_EQ(here.ids, gone.ids);
}

// A holder that opens links but then does not answer SendHeldKv in time (frozen, cut off) is given
// up at its first timeout: the pulls queued behind are prefilled at once, not each after a timeout
// of its own and a new link's.
class FrozenHolderPeers final : public KvLinkPeers {
 public:
  explicit FrozenHolderPeers(std::shared_ptr<LoopbackPeers> inner) : inner_(std::move(inner)) {}
  void open_link(const std::string& address, const std::string& link_name,
                 const std::vector<uint8_t>& rendezvous) override {
    ++opens_;
    inner_->open_link(address, link_name, rendezvous);
  }
  void send_held(const std::string& address, const std::string& /*link_name*/,
                 const KvStage& /*held*/, bool drop) override {
    if (drop) return;
    ++sends_;
    throw PeerNotAnswering(ErrorCode::kUnavailable,
                           "SendHeldKv to " + address + ": Deadline Exceeded (gRPC status 4)");
  }
  int opens() const { return opens_; }
  int sends() const { return sends_; }

 private:
  std::shared_ptr<LoopbackPeers> inner_;
  std::atomic<int> opens_{0};
  std::atomic<int> sends_{0};
};

TEST(HeldKvLinkTest, AHolderThatStopsAnsweringIsGivenUpAtItsFirstTimeout) {
  auto loopback = std::make_shared<LoopbackPeers>();
  auto frozen = std::make_shared<FrozenHolderPeers>(loopback);
  const std::string prompt(40, 'f');
  LocalGenerationService prefill(holding_process(2.0));
  loopback->add("prefill", &prefill);
  const test::Collected first = prefill_only(prefill, prompt, 8);
  ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
  LocalGenerationService decode(pulling_process(), with_peers(frozen));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(decode.submit(continuation(prompt, 8, first)));
  for (auto& stream : streams) {
    const test::Collected result = collect(*stream);
    EXPECT_EQ(result.finish, Finish::kLength) << result.error;
    EXPECT_EQ(result.timings.kv_transfer_seconds, 0.0);  // prefilled here instead
  }
  EXPECT_EQ(frozen->sends(), 1);
  EXPECT_EQ(frozen->opens(), 1);
  EXPECT_TRUE(all_blocks_free(prefill));  // the held KV expired there
  EXPECT_TRUE(all_blocks_free(decode));
}

// Shutting the decode process down while pulls are queued or in flight, and aborting others:
// every stream ends, and the prefill engine gets every block back (sent, dropped or expired).
TEST(HeldKvLinkTest, AbortsAndShutdownMidPullLoseNothing) {
  auto peers = std::make_shared<LoopbackPeers>();
  LocalGenerationService prefill(holding_process(/*hold_s=*/2.0));
  peers->add("prefill", &prefill);
  std::vector<std::string> texts;
  std::vector<test::Collected> firsts;
  for (int i = 0; i < 10; ++i) {
    texts.push_back(std::string(30 + 41 * i, 'k'));
    firsts.push_back(prefill_only(prefill, texts.back(), 32));
    ASSERT_EQ(firsts.back().finish, Finish::kHandoff) << firsts.back().error;
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  {
    LocalGenerationService decode(pulling_process(), with_peers(peers));
    for (size_t i = 0; i < texts.size(); ++i) {
      streams.push_back(decode.submit(continuation(texts[i], 32, firsts[i])));
      if (i % 3 == 0) decode.abort(streams.back()->id());
    }
  }  // shut down with pulls at every stage
  for (auto& stream : streams) {
    const test::Collected got = collect(*stream);
    EXPECT_NE(got.finish, Finish::kNone);
    EXPECT_NE(got.finish, Finish::kError) << got.error;
  }
  EXPECT_TRUE(all_blocks_free(prefill));
}

// What another process may send to OpenKvLink / SendHeldKv: bad input is refused naming what is
// wrong; a decode process that opens another link here closes its older one (abandoned: it keeps
// one per source); a link that cannot come up is reported as such (open another).
TEST(HeldKvLinkTest, LinkRequestsAreCheckedAndAReopenedLinkReplacesTheOld) {
  LocalGenerationService prefill(holding_process());
  const auto code_of = [](const std::function<void()>& call) -> std::string {
    try {
      call();
    } catch (const ServiceError& e) {
      return std::to_string(static_cast<int>(e.code())) + " " + e.what();
    }
    return "accepted";
  };
  const std::string invalid = std::to_string(static_cast<int>(ErrorCode::kInvalidArgument));
  const std::string unavailable = std::to_string(static_cast<int>(ErrorCode::kUnavailable));
  // Nobody listens at port 1: the links join (in the background) and then fail.
  const std::string text = "127.0.0.1:1/00000000000000aa";
  const std::vector<uint8_t> nowhere(text.begin(), text.end());
  EXPECT_EQ(code_of([&] { prefill.open_kv_link("", nowhere); }).rfind(invalid, 0), 0u);
  EXPECT_EQ(
      code_of([&] { prefill.open_kv_link(std::string(200, 'n'), nowhere); }).rfind(invalid, 0), 0u);
  EXPECT_EQ(code_of([&] { prefill.open_kv_link("x-1", {}); }).rfind(invalid, 0), 0u);
  EXPECT_EQ(code_of([&] {
              prefill.open_kv_link("x-1", std::vector<uint8_t>(HW_PEER_ID_MAX + 1, 7));
            }).rfind(invalid, 0),
            0u);
  KvStage held;
  held.shm_name = "/etc/passwd";
  held.held = true;
  const std::string not_a_name = code_of([&] { prefill.send_held_kv("x-1", held, false); });
  EXPECT_EQ(not_a_name.rfind(invalid, 0), 0u) << not_a_name;

  ASSERT_EQ(code_of([&] { prefill.open_kv_link("decoder-7-1", nowhere); }), "accepted");
  ASSERT_EQ(code_of([&] { prefill.open_kv_link("decoder-7-2", nowhere); }), "accepted");
  EXPECT_EQ(code_of([&] { prefill.open_kv_link("decoder-7-2", nowhere); }).rfind(invalid, 0), 0u);
  const test::Collected first = prefill_only(prefill, "a held prompt", 4);
  ASSERT_EQ(first.finish, Finish::kHandoff) << first.error;
  const std::string replaced =
      code_of([&] { prefill.send_held_kv("decoder-7-1", *first.kv_stage, false); });
  EXPECT_EQ(replaced.rfind(unavailable, 0), 0u) << replaced;
  EXPECT_NE(replaced.find("no KV link named"), std::string::npos) << replaced;
  const std::string down =
      code_of([&] { prefill.send_held_kv("decoder-7-2", *first.kv_stage, false); });
  EXPECT_EQ(down.rfind(unavailable, 0), 0u) << down;
  // Neither attempt took the held KV: it is still there to drop.
  EXPECT_EQ(code_of([&] { prefill.send_held_kv("", *first.kv_stage, true); }), "accepted");
  EXPECT_TRUE(all_blocks_free(prefill));

  LocalGenerationService not_holding(pulling_process());
  EXPECT_EQ(code_of([&] { not_holding.open_kv_link("x-1", nowhere); }).rfind(unavailable, 0), 0u);
}

TEST(HeldKvLinkTest, ConfigurationsThatCannotHoldKvAreRefusedNamingWhy) {
  const auto refused = [](const std::string& server_and_transport) -> std::string {
    try {
      LocalGenerationService service(tiny_deployment(checkpoint(), kEngine, server_and_transport));
    } catch (const core::Error& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string linkless =
      refused("[server]\nrole = \"engine\"\nkv_handoff = \"link\"\n" + linkless_transport());
  EXPECT_NE(linkless.find("has none"), std::string::npos) << linkless;
  EXPECT_NE(
      refused("[server]\nrole = \"engine\"\nkv_handoff = \"link\"\n").find("no [kv_transport]"),
      std::string::npos);
  EXPECT_NE(refused("[server]\nrole = \"engine\"\nkv_handoff = \"pigeon\"\n").find("kv_handoff"),
            std::string::npos);
  EXPECT_NE(refused("[server]\nkv_handoff = \"link\"\n").find("only for engine processes"),
            std::string::npos);
}

}  // namespace
}  // namespace headway::serving
