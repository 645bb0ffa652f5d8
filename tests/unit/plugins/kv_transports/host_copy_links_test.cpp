// host_copy's peer links (abi.h, ABI 1.2): KV between engine processes on one host through a
// shared-memory object with one ring per direction. Two transport instances stand for the two
// processes (the rings do not care whether the other side is this process or another; one test
// forks a real second process). Every byte must arrive where the receive's block list says, in
// posting order, also for transfers larger than the ring and blocks that straddle its end; any
// mismatch, close, timeout or vanished process must fail the transfers on both sides instead of
// hanging; bad ids, ranks and posts are refused naming what is wrong; no object is left in
// /dev/shm.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/abi.h>
#include <headway/core/error.h>
#include <headway/core/plugin_instances.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "host_copy_harness.h"

namespace headway::core {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// A region of `blocks` host blocks of `block_bytes` (stride `stride`), each byte a function of its
// block, offset and `seed`, so that a misplaced or shifted byte shows.
struct Region {
  Region(uint32_t blocks, uint64_t block_bytes, uint64_t stride, uint8_t seed)
      : bytes(blocks * stride), block_bytes(block_bytes), stride(stride) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<uint8_t>((i / stride) * 131 + (i % stride) * 7 + seed);
    }
  }
  hw_memory_desc memory() {
    return hw_memory_desc{bytes.data(), bytes.size(), HW_MEMORY_HOST, -1, block_bytes, stride};
  }
  std::span<const uint8_t> block(uint32_t b) const {
    return std::span<const uint8_t>(bytes).subspan(b * stride, block_bytes);
  }
  std::vector<uint8_t> bytes;
  uint64_t block_bytes;
  uint64_t stride;
};

std::string id_text(const std::vector<uint8_t>& id) { return std::string(id.begin(), id.end()); }

bool in_dev_shm(const std::string& name) {
  return std::filesystem::exists("/dev/shm" + name);  // name begins with '/'
}

// Polls a link until it leaves PENDING (bounded only so that a broken transport cannot hang the
// run; no timing is asserted).
int32_t settled_state(KvTransportInstance& transport, uint64_t link) {
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  int32_t state = transport.peer_state(link);
  while (state == HW_TRANSFER_PENDING && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    state = transport.peer_state(link);
  }
  return state;
}

// Two transports joined on one link: `a` made the id and holds rank 1, `b` rank 0 (as the decode
// and prefill processes do).
struct JoinedPair {
  explicit JoinedPair(std::string_view options = "") : a(options), b(options) {
    Region any(1, 64, 64, 0);
    id = a->peer_rendezvous();
    link_a = a->peer_join(id, 1, any.memory());
    link_b = b->peer_join(id, 0, any.memory());
    EXPECT_EQ(settled_state(*a, link_a), HW_TRANSFER_DONE);
    EXPECT_EQ(settled_state(*b, link_b), HW_TRANSFER_DONE);
  }
  TransportHarness a;
  TransportHarness b;
  std::vector<uint8_t> id;
  uint64_t link_a = 0;
  uint64_t link_b = 0;
};

TEST(HostCopyLinks, ScrambledBlocksArriveByteForByteInPostingOrder) {
  // 1 MiB rings; the second transfer is 3.4 MiB, so it streams through the ring more than three
  // times, and 4,099-byte blocks (with a 4,160-byte stride on the sending side) straddle its end.
  JoinedPair pair("peer_link_buffer_mb = 1");
  Region source(900, 4099, 4160, 11);
  Region destination(900, 4099, 4099, 0);
  const std::vector<std::vector<uint32_t>> sends = {{5, 3, 899, 0},
                                                    [] {
                                                      std::vector<uint32_t> v;
                                                      for (uint32_t b = 0; b < 850; ++b)
                                                        v.push_back((b * 37) % 900);
                                                      return v;
                                                    }(),
                                                    {7}};
  const std::vector<std::vector<uint32_t>> receives = {{10, 11, 12, 13},
                                                       [] {
                                                         std::vector<uint32_t> v;
                                                         for (uint32_t b = 0; b < 850; ++b)
                                                           v.push_back((b * 53 + 20) % 900);
                                                         return v;
                                                       }(),
                                                       {899}};
  std::vector<uint64_t> receive_handles, send_handles;
  // Receives first: they wait for their records, which then come in posting order.
  for (const auto& blocks : receives) {
    receive_handles.push_back(
        pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), blocks));
  }
  for (const auto& blocks : sends) {
    send_handles.push_back(pair.b->peer_post(pair.link_b, HW_PEER_SEND, source.memory(), blocks));
  }
  for (uint64_t handle : send_handles) {
    const KvTransportInstance::Progress p = wait(*pair.b, handle);
    EXPECT_EQ(p.state, HW_TRANSFER_DONE);
    EXPECT_GT(p.seconds, 0.0);
  }
  for (uint64_t handle : receive_handles) {
    EXPECT_EQ(wait(*pair.a, handle).state, HW_TRANSFER_DONE);
  }
  // Receives write blocks in posting order, so a destination block holds what the last receive
  // that names it was sent.
  std::vector<int> last_writer(900, -1);
  std::vector<uint32_t> source_of(900, 0);
  for (size_t t = 0; t < receives.size(); ++t) {
    for (size_t i = 0; i < receives[t].size(); ++i) {
      last_writer[receives[t][i]] = static_cast<int>(t);
      source_of[receives[t][i]] = sends[t][i];
    }
  }
  int checked = 0;
  for (uint32_t b = 0; b < 900; ++b) {
    if (last_writer[b] < 0) continue;
    const auto got = destination.block(b);
    const auto want = source.block(source_of[b]);
    ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin()))
        << "destination block " << b << " does not hold source block " << source_of[b];
    ++checked;
  }
  EXPECT_GT(checked, 800);
  // Both ranks joined: the name is gone, nothing stays in /dev/shm.
  EXPECT_FALSE(in_dev_shm(id_text(pair.id)));
}

TEST(HostCopyLinks, BothDirectionsOfOneLinkMoveAtOnce) {
  JoinedPair pair("peer_link_buffer_mb = 1");
  Region a_source(64, 65536, 65536, 1), a_destination(64, 65536, 65536, 0);
  Region b_source(64, 65536, 65536, 2), b_destination(64, 65536, 65536, 0);
  std::vector<uint32_t> blocks(64);
  for (uint32_t i = 0; i < 64; ++i) blocks[i] = 63 - i;
  const uint64_t a_send = pair.a->peer_post(pair.link_a, HW_PEER_SEND, a_source.memory(), blocks);
  const uint64_t b_send = pair.b->peer_post(pair.link_b, HW_PEER_SEND, b_source.memory(), blocks);
  const uint64_t a_receive =
      pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, a_destination.memory(), blocks);
  const uint64_t b_receive =
      pair.b->peer_post(pair.link_b, HW_PEER_RECEIVE, b_destination.memory(), blocks);
  for (auto [transport, handle] : {std::pair{&pair.a, a_send}, std::pair{&pair.b, b_send},
                                   std::pair{&pair.a, a_receive}, std::pair{&pair.b, b_receive}}) {
    EXPECT_EQ(wait(**transport, handle).state, HW_TRANSFER_DONE);
  }
  EXPECT_EQ(a_destination.bytes, b_source.bytes);
  EXPECT_EQ(b_destination.bytes, a_source.bytes);
}

TEST(HostCopyLinks, AReceivePostedForAnotherShapeBreaksTheLinkOnBothSides) {
  JoinedPair pair;
  Region source(8, 4096, 4096, 3), destination(8, 4096, 4096, 0);
  const std::vector<uint8_t> before = destination.bytes;
  const std::vector<uint32_t> four = {0, 1, 2, 3}, five = {0, 1, 2, 3, 4};
  const uint64_t receive =
      pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), five);
  const uint64_t queued =
      pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), four);
  const uint64_t send = pair.b->peer_post(pair.link_b, HW_PEER_SEND, source.memory(), four);
  EXPECT_EQ(wait(*pair.a, receive).state, HW_TRANSFER_FAILED);
  EXPECT_EQ(wait(*pair.a, queued).state, HW_TRANSFER_FAILED) << "a broken link fails its queue";
  EXPECT_EQ(pair.a->peer_state(pair.link_a), HW_TRANSFER_FAILED);
  // The send had left its memory before the receive looked at it (a send is done once its bytes
  // left), so it may be DONE; the link is broken on that side too once it notices.
  wait(*pair.b, send);
  EXPECT_EQ(settled_state(*pair.b, pair.link_b), HW_TRANSFER_FAILED);
  const Error refused = error_of(
      [&] { pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), four); });
  EXPECT_THAT(refused.what(), HasSubstr("has failed"));
  EXPECT_EQ(destination.bytes, before) << "nothing moved into the destination";
}

TEST(HostCopyLinks, ClosingOneSideFailsWhatTheOtherSideHasPosted) {
  JoinedPair pair;
  Region destination(4, 4096, 4096, 0);
  const std::vector<uint32_t> blocks = {0, 1};
  const uint64_t receive =
      pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), blocks);
  pair.b->peer_close(pair.link_b);
  EXPECT_EQ(wait(*pair.a, receive).state, HW_TRANSFER_FAILED);
  EXPECT_EQ(settled_state(*pair.a, pair.link_a), HW_TRANSFER_FAILED);
  // Closing the failed side, and closing twice, are fine.
  pair.a->peer_close(pair.link_a);
  pair.a->peer_close(pair.link_a);
}

// A send is DONE once its bytes are in the ring, and the sender may then close (the prefill
// process frees the KV and may drop the link): the receive posted after that still gets them.
TEST(HostCopyLinks, BytesSentBeforeTheOtherSideClosedStillArrive) {
  JoinedPair pair;
  Region source(8, 4096, 4096, 9), destination(8, 4096, 4096, 0);
  const std::vector<uint32_t> from = {6, 1, 3}, into = {0, 7, 2};
  const uint64_t send = pair.b->peer_post(pair.link_b, HW_PEER_SEND, source.memory(), from);
  ASSERT_EQ(wait(*pair.b, send).state, HW_TRANSFER_DONE);
  pair.b->peer_close(pair.link_b);
  EXPECT_EQ(pair.a->peer_state(pair.link_a), HW_TRANSFER_DONE) << "unread bytes keep it up";
  const uint64_t receive =
      pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), into);
  ASSERT_EQ(wait(*pair.a, receive).state, HW_TRANSFER_DONE);
  for (size_t i = 0; i < from.size(); ++i) {
    EXPECT_TRUE(std::equal(source.block(from[i]).begin(), source.block(from[i]).end(),
                           destination.block(into[i]).begin()));
  }
  // Everything read: the link is over now.
  EXPECT_EQ(settled_state(*pair.a, pair.link_a), HW_TRANSFER_FAILED);
}

// A send larger than the ring with nobody receiving sits in its link thread, waiting for room;
// closing the link fails it by the time the close returns.
TEST(HostCopyLinks, ClosingALinkFailsATransferItsThreadIsMoving) {
  JoinedPair pair("peer_link_buffer_mb = 1");
  Region source(48, 65536, 65536, 4);  // 3 MiB
  std::vector<uint32_t> blocks(48);
  for (uint32_t i = 0; i < 48; ++i) blocks[i] = i;
  const uint64_t send = pair.b->peer_post(pair.link_b, HW_PEER_SEND, source.memory(), blocks);
  // Not a timing assertion: it only makes it likely that the thread has taken the send up.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pair.b->peer_close(pair.link_b);
  EXPECT_EQ(pair.b->poll(send).state, HW_TRANSFER_FAILED);
}

TEST(HostCopyLinks, ClosingALinkFailsItsOwnPendingTransfers) {
  JoinedPair pair;
  Region destination(4, 4096, 4096, 0);
  const std::vector<uint32_t> blocks = {0};
  const uint64_t receive =
      pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), blocks);
  pair.a->peer_close(pair.link_a);
  EXPECT_EQ(pair.a->poll(receive).state, HW_TRANSFER_FAILED) << "failed by the time close returns";
}

TEST(HostCopyLinks, ATransferNotDoneInTimeFails) {
  JoinedPair pair("peer_link_timeout_s = 0.2");
  Region destination(4, 4096, 4096, 0);
  const std::vector<uint32_t> blocks = {0};
  const uint64_t receive =
      pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), blocks);
  EXPECT_EQ(wait(*pair.a, receive).state, HW_TRANSFER_FAILED);
  EXPECT_EQ(settled_state(*pair.b, pair.link_b), HW_TRANSFER_FAILED) << "the other side is told";
}

TEST(HostCopyLinks, TheTimeoutCountsFromTheLastBytesMovedNotFromThePost) {
  // Three sends, each filling the 1 MiB ring, posted at once; the receives come 1.2 s apart. The
  // third send waits 2.4 s from its post but never more than 1.2 s without a byte moving, so it
  // must not time out (2 s); a wait of 2 s with nothing moving must (ATransferNotDoneInTimeFails).
  JoinedPair pair("peer_link_buffer_mb = 1\npeer_link_timeout_s = 2");
  Region source(3, 1 << 20, 1 << 20, 21);
  Region destination(3, 1 << 20, 1 << 20, 0);
  const std::vector<std::vector<uint32_t>> block = {{0}, {1}, {2}};  // live until polled done
  std::vector<uint64_t> sends;
  for (uint32_t b = 0; b < 3; ++b) {
    sends.push_back(pair.b->peer_post(pair.link_b, HW_PEER_SEND, source.memory(), block[b]));
  }
  std::vector<uint64_t> receives;
  for (uint32_t b = 0; b < 3; ++b) {
    if (b > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    receives.push_back(
        pair.a->peer_post(pair.link_a, HW_PEER_RECEIVE, destination.memory(), block[b]));
  }
  for (uint32_t b = 0; b < 3; ++b) {
    EXPECT_EQ(wait(*pair.b, sends[b]).state, HW_TRANSFER_DONE) << "send " << b;
    EXPECT_EQ(wait(*pair.a, receives[b]).state, HW_TRANSFER_DONE) << "receive " << b;
    EXPECT_TRUE(std::ranges::equal(destination.block(b), source.block(b))) << "block " << b;
  }
}

TEST(HostCopyLinks, AJoinTheOtherSideNeverAnswersFailsAndRemovesTheName) {
  TransportHarness a("peer_link_timeout_s = 0.2");
  Region any(1, 64, 64, 0);
  const std::vector<uint8_t> id = a->peer_rendezvous();
  EXPECT_TRUE(in_dev_shm(id_text(id)));
  const uint64_t link = a->peer_join(id, 1, any.memory());
  EXPECT_EQ(settled_state(*a, link), HW_TRANSFER_FAILED);
  a->peer_close(link);
  EXPECT_FALSE(in_dev_shm(id_text(id)));
}

TEST(HostCopyLinks, IdsNobodyJoinedAreRemovedWithTheTransport) {
  std::vector<uint8_t> id;
  {
    TransportHarness a;
    id = a->peer_rendezvous();
    EXPECT_TRUE(in_dev_shm(id_text(id)));
  }
  EXPECT_FALSE(in_dev_shm(id_text(id)));
}

TEST(HostCopyLinks, BadIdsRanksAndKindsAreRefusedNamingTheProblem) {
  TransportHarness a, b;
  Region any(1, 64, 64, 0);
  auto text = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  const Error not_an_id = error_of([&] { a->peer_join(text("127.0.0.1:5/ab"), 0, any.memory()); });
  EXPECT_THAT(not_an_id.what(), HasSubstr("is not a link rendezvous id"));
  const Error slash = error_of([&] { a->peer_join(text("/headway-kvlink-1/x"), 0, any.memory()); });
  EXPECT_THAT(slash.what(), HasSubstr("not one of [0-9a-z-]"));
  const Error gone =
      error_of([&] { a->peer_join(text("/headway-kvlink-1-00000000deadbeef"), 0, any.memory()); });
  EXPECT_EQ(gone.code(), HW_NOT_FOUND);
  EXPECT_THAT(gone.what(), HasSubstr("processes of one host only"));
  const std::vector<uint8_t> id = a->peer_rendezvous();
  EXPECT_THAT(error_of([&] { a->peer_join(id, 2, any.memory()); }).what(),
              HasSubstr("rank 2 is not 0 or 1"));
  const uint64_t link = a->peer_join(id, 0, any.memory());
  const Error taken = error_of([&] { b->peer_join(id, 0, any.memory()); });
  EXPECT_THAT(taken.what(), HasSubstr("rank 0 of link"));
  EXPECT_THAT(taken.what(), HasSubstr("is already held by pid " + std::to_string(::getpid())));
  hw_memory_desc device = any.memory();
  device.kind = HW_MEMORY_DEVICE;
  device.device_id = 0;
  const Error on_device = error_of([&] { b->peer_join(id, 1, device); });
#if HEADWAY_HOST_COPY_CUDA
  // Built with CUDA on a machine without a GPU: the rings cannot be pinned.
  EXPECT_THAT(on_device.what(), HasSubstr("host_copy"));
#else
  EXPECT_EQ(on_device.code(), HW_UNIMPLEMENTED);
  EXPECT_THAT(on_device.what(), HasSubstr("need a build of the plugin with CUDA"));
#endif
  a->peer_close(link);
}

TEST(HostCopyLinks, PostsOfAnotherKindOrBeyondTheRegionAreRefused) {
  JoinedPair pair;
  Region region(4, 4096, 4096, 0);
  const std::vector<uint32_t> beyond = {1, 4};
  const Error out =
      error_of([&] { pair.a->peer_post(pair.link_a, HW_PEER_SEND, region.memory(), beyond); });
  EXPECT_EQ(out.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(out.what(), HasSubstr("blocks[1] = 4 lies beyond memory.bytes 16384"));
  hw_memory_desc simulated = region.memory();
  simulated.kind = HW_MEMORY_NONE;
  const std::vector<uint32_t> one = {0};
  EXPECT_THAT(
      error_of([&] { pair.a->peer_post(pair.link_a, HW_PEER_SEND, simulated, one); }).what(),
      HasSubstr("memory of kind 2 on a link joined for kind 0"));
  EXPECT_EQ(pair.a->peer_state(pair.link_a), HW_TRANSFER_DONE) << "a refused post breaks nothing";
}

TEST(HostCopyLinks, StartStillCopiesWithinAProcess) {
  // The links live beside start(): the same instance copies between its own engines.
  TransportHarness t;
  Region source(4, 512, 512, 5), destination(4, 512, 512, 0);
  const std::vector<uint32_t> from = {3, 2}, to = {0, 1};
  const hw_kv_transfer transfer{sizeof(hw_kv_transfer),
                                1,
                                source.memory(),
                                destination.memory(),
                                from.data(),
                                to.data(),
                                2,
                                0,
                                1};
  EXPECT_EQ(wait(*t, t->start(transfer)).state, HW_TRANSFER_DONE);
  EXPECT_TRUE(
      std::equal(source.block(3).begin(), source.block(3).end(), destination.block(0).begin()));
}

// A second process joins and then ends without closing (as a crash would): what this side posts
// fails, naming the process, instead of waiting for the timeout.
TEST(HostCopyLinks, TheOtherProcessEndingFailsTheLink) {
  TransportHarness here;
  const std::vector<uint8_t> live = here->peer_rendezvous();
  // Fork before this process starts any link thread: the child may then load plugins and start
  // threads of its own safely.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 1;
    {
      TransportHarness there;
      Region any(1, 64, 64, 0);
      const uint64_t link = there->peer_join(live, 0, any.memory());
      if (settled_state(*there, link) == HW_TRANSFER_DONE) code = 0;
      std::_Exit(code);  // no destructors: the link is not closed, as in a crash
    }
  }
  Region destination(4, 4096, 4096, 0);
  const uint64_t link = here->peer_join(live, 1, destination.memory());
  EXPECT_EQ(settled_state(*here, link), HW_TRANSFER_DONE);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child did not see the link up";
  // The child is reaped: its pid no longer exists.
  EXPECT_EQ(settled_state(*here, link), HW_TRANSFER_FAILED);
  const std::vector<uint32_t> blocks = {0};
  EXPECT_THAT(error_of([&] {
                here->peer_post(link, HW_PEER_RECEIVE, destination.memory(), blocks);
              }).what(),
              HasSubstr("(pid " + std::to_string(child) + ") is gone"));
}

// A process that made an id and crashed before anyone joined leaves the object in /dev/shm; the
// next transport to make an id on the host removes it (its name says whose it was).
TEST(HostCopyLinks, AnIdOfAProcessThatCrashedBeforeAnyoneJoinedIsRemovedByTheNextRendezvous) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_ends[0]);
    TransportHarness there;
    const std::vector<uint8_t> id = there->peer_rendezvous();
    const bool written =
        ::write(pipe_ends[1], id.data(), id.size()) == static_cast<ssize_t>(id.size());
    std::_Exit(written ? 0 : 1);  // no destructors: the id is not removed, as in a crash
  }
  ::close(pipe_ends[1]);
  std::string id(256, '\0');
  const ssize_t got = ::read(pipe_ends[0], id.data(), id.size());
  ::close(pipe_ends[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_GT(got, 0);
  id.resize(static_cast<size_t>(got));
  EXPECT_THAT(id, HasSubstr("-" + std::to_string(child) + "-")) << "the name says whose it is";
  ASSERT_TRUE(in_dev_shm(id)) << "the crash left it";

  TransportHarness next;
  const std::vector<uint8_t> fresh = next->peer_rendezvous();
  EXPECT_FALSE(in_dev_shm(id));
  EXPECT_TRUE(in_dev_shm(id_text(fresh))) << "its own new id stays";
}

}  // namespace
}  // namespace headway::core
