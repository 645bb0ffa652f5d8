// Staged KV objects (kv_stage_file.h): the names a request may carry, the two sweeps that keep
// /dev/shm from filling with objects nobody will read, and the writer and reader a KV transport
// copies through.
#include "kv_stage_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <headway/sdk/shm_owner.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kv_stage_janitor.h"

namespace headway::serving {
namespace {

KvStage stage_one_block(const std::string& name, std::vector<unsigned char>& cache) {
  hw_memory_desc memory{};
  memory.base = cache.data();
  memory.bytes = cache.size();
  memory.kind = HW_MEMORY_HOST;
  memory.device_id = -1;
  memory.block_bytes = cache.size();
  memory.block_stride = cache.size();
  const std::vector<uint32_t> blocks = {0};
  return write_kv_stage(name, memory, blocks, 4, 16);
}

// Forks a child that creates one staged-KV-named object under its own pid (read in the child:
// kv_stage_name() caches the parent's) and exits without removing it; returns the child's pid.
pid_t exited_writer_of_one_object(uint64_t request) {
  const pid_t writer = ::fork();
  if (writer == 0) {
    const std::string name = std::string(kKvStagePrefix) + sdk::own_shm_owner_tag() +
                             "0000000000000000-0-" + std::to_string(request);
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    ::_exit(fd >= 0 ? 0 : 3);
  }
  int status = 0;
  if (::waitpid(writer, &status, 0) != writer || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << "the writer could not create its object";
  }
  return writer;
}

TEST(KvStageName, OnlyNamesWithThePrefixAndNoFurtherSlash) {
  EXPECT_TRUE(is_kv_stage_name(kv_stage_name(0, 1)));
  EXPECT_FALSE(is_kv_stage_name("/headway-kv-"));
  EXPECT_FALSE(is_kv_stage_name("/headway-kv-1/../x"));
  EXPECT_FALSE(is_kv_stage_name("/dev-shm-other"));
  EXPECT_NE(kv_stage_name(0, 1), kv_stage_name(1, 1));
}

TEST(SweepExpiredKvStages, RemovesOnlyThisProcesssObjectsOlderThanTheLifetime) {
  std::vector<unsigned char> cache(256, 3);
  const std::string mine = kv_stage_name(0, 424242);
  stage_one_block(mine, cache);
  // Another (running) process's object: pid 1 always runs.
  const std::string theirs = std::string(kKvStagePrefix) +
                             std::to_string(sdk::own_pid_namespace()) +
                             "-1-0000000000000000-0-424242";
  const int fd = ::shm_open(theirs.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);

  sweep_expired_kv_stages(3600.0);  // (no count: another process's old stage may be there)
  EXPECT_TRUE(kv_stage_is_here(mine)) << "young: kept";
  EXPECT_GE(sweep_expired_kv_stages(0.0), 1u);
  EXPECT_FALSE(kv_stage_is_here(mine));
  EXPECT_TRUE(kv_stage_is_here(theirs)) << "never another process's object";
  sweep_orphaned_kv_stages();
  EXPECT_TRUE(kv_stage_is_here(theirs)) << "pid 1 runs: not an orphan";
  discard_kv_stage(theirs);
}

TEST(SweepOrphanedKvStages, RemovesTheObjectsOfAnExitedProcessInThisPidNamespaceOnly) {
  const pid_t writer = exited_writer_of_one_object(1);
  const std::string owner =
      std::to_string(sdk::own_pid_namespace()) + "-" + std::to_string(writer) + "-";
  // The same dead pid in another pid namespace (a container sharing /dev/shm): not known dead.
  const std::string elsewhere = std::string(kKvStagePrefix) +
                                std::to_string(sdk::own_pid_namespace() + 1) + "-" +
                                std::to_string(writer) + "-0000000000000000-0-1";
  const int fd = ::shm_open(elsewhere.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);

  // (No count: a test or engine process running beside this one may sweep the object first.)
  sweep_orphaned_kv_stages();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    EXPECT_EQ(entry.path().filename().string().find("headway-kv-" + owner), std::string::npos)
        << "the exited writer's object is gone";
  }
  EXPECT_TRUE(kv_stage_is_here(elsewhere));
  discard_kv_stage(elsewhere);
}

// An exited writer's object that nobody read within the lifetime goes at the next periodic sweep
// of any engine process (a crashed prefill process that is not restarted would otherwise leave its
// staged KV in host memory); one of a running process is never touched (the test above).
TEST(SweepExpiredKvStages, AlsoRemovesExpiredObjectsOfExitedWriters) {
  const pid_t writer = exited_writer_of_one_object(2);
  const std::string owner =
      "headway-kv-" + std::to_string(sdk::own_pid_namespace()) + "-" + std::to_string(writer) + "-";
  const auto left = [&] {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
      if (entry.path().filename().string().rfind(owner, 0) == 0) return true;
    }
    return false;
  };
  // (No count, and nothing judged before the sweep: a test or engine process running beside this
  // one may sweep the object first.)
  sweep_expired_kv_stages(0.0);
  EXPECT_FALSE(left()) << "the exited writer's expired object is gone";
}

// From helper-208's review: a stage whose writer runs in another pid namespace (a container
// sharing /dev/shm) is not known to have exited, so a crashed prefill container's stages stayed
// for good. Far older than any running writer lets its stages get, it goes too; younger, it stays.
TEST(SweepExpiredKvStages, AStageOfAnUnknownWriterGoesOnceFarPastTheLifetime) {
  const auto foreign = [](const std::string& suffix, std::chrono::seconds age) {
    const std::string name =
        std::string(kKvStagePrefix) + std::to_string(sdk::own_pid_namespace() + 1) + "-1-" + suffix;
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    ::close(fd);
    const auto file = std::filesystem::path("/dev/shm") / name.substr(1);
    std::filesystem::last_write_time(file, std::filesystem::file_time_type::clock::now() - age);
    return name;
  };
  const std::string abandoned = foreign("0000000000000000-0-515151", std::chrono::hours(2));
  const std::string recent = foreign("0000000000000000-0-525252", std::chrono::minutes(10));
  sweep_expired_kv_stages(120.0);
  EXPECT_FALSE(kv_stage_is_here(abandoned));
  EXPECT_TRUE(kv_stage_is_here(recent)) << "its writer may still run, and its reader want it";
  discard_kv_stage(recent);
}

TEST(KvStageJanitor, SweepsOnItsPeriod) {
  std::vector<unsigned char> cache(256, 5);
  const std::string name = kv_stage_name(0, 434343);
  stage_one_block(name, cache);
  {
    KvStageJanitor janitor(std::chrono::milliseconds(10), std::chrono::seconds(0));
    for (int i = 0; i < 1000 && kv_stage_is_here(name); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }  // the destructor joins the thread
  EXPECT_FALSE(kv_stage_is_here(name));
  discard_kv_stage(name);
}

// From helper-203's review: a router removes the object an engine process names in its hand-off,
// and removed any shared-memory object of its user so named. Only a stage's name is removed.
TEST(DiscardKvStage, RemovesNothingButAStage) {
  const std::string other = "/headway-test-not-a-stage-" + std::to_string(::getpid());
  const int fd = ::shm_open(other.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ::close(fd);
  discard_kv_stage(other);
  EXPECT_TRUE(std::filesystem::exists("/dev/shm" + other));
  ::shm_unlink(other.c_str());
  const std::string stage = kv_stage_name(0, 474747);
  const int stage_fd = ::shm_open(stage.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(stage_fd, 0) << std::strerror(errno);
  ::close(stage_fd);
  discard_kv_stage(stage);
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + stage));
}

// What sits in /dev/shm under a stage's name is read only when this user staged it there as a
// regular file: a FIFO planted there (which would block a reader forever) is refused at once.
TEST(KvStageIsHere, RefusesWhatIsNotARegularObjectOfThisUser) {
  const std::string name = kv_stage_name(0, 464646);
  const std::string path = "/dev/shm" + name;
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_FALSE(kv_stage_is_here(name));
  StagedBytes bytes(name);
  EXPECT_NE(bytes.error().find("not a staged KV object of this user"), std::string::npos)
      << bytes.error();
  ::unlink(path.c_str());
}

TEST(KvStageName, OnlyThisProcesssNamesAreItsOwn) {
  EXPECT_TRUE(is_own_kv_stage_name(kv_stage_name(3, 9)));
  EXPECT_EQ(kv_stage_name(3, 9).rfind(own_kv_stage_prefix(), 0), 0u);
  EXPECT_FALSE(is_own_kv_stage_name(std::string(kKvStagePrefix) + "1-0000000000000000-0-1"));
  EXPECT_FALSE(is_own_kv_stage_name(own_kv_stage_prefix() + "0/../x"));
}

TEST(ReadKvStage, SaysWhyAStageCannotBeUsed) {
  std::vector<unsigned char> cache(256, 7);
  KvStage stage = stage_one_block(kv_stage_name(0, 454545), cache);
  hw_memory_desc memory{};
  memory.base = cache.data();
  memory.bytes = cache.size();
  memory.kind = HW_MEMORY_HOST;
  memory.block_bytes = cache.size();
  memory.block_stride = cache.size();
  EXPECT_EQ(kv_stage_problem(stage, memory, 16), "");
  EXPECT_NE(kv_stage_problem(stage, memory, 32).find("16 tokens"), std::string::npos);
  KvStage failed = stage;
  failed.unusable = "fetching it from h:1 failed: reset";
  EXPECT_EQ(kv_stage_problem(failed, memory, 16), failed.unusable);
  KvStage short_fetch = stage;
  short_fetch.fetched = std::make_shared<const std::vector<unsigned char>>(100, 0);
  EXPECT_NE(kv_stage_problem(short_fetch, memory, 16).find("100 bytes were fetched"),
            std::string::npos);
  discard_kv_stage(stage.shm_name);
  EXPECT_NE(kv_stage_problem(stage, memory, 16).find("No such file"), std::string::npos);
}

// 8 layers of 4 KV heads and 4 of 8 make the same bytes per block: only the model's shape tells
// that a decode engine would read another model's KV (helper-163 saw one decode on it).
TEST(KvStageModel, AStageOfAnotherModelShapeIsRefusedNamingBoth) {
  hw_model_info model{};
  model.layers = 8;
  model.kv_heads = 4;
  model.head_dim = 16;
  KvStage stage;
  EXPECT_EQ(kv_stage_model_problem(stage, model), "") << "a stage that does not say is read";
  stage.layers = 8;
  stage.kv_heads = 4;
  stage.head_dim = 16;
  EXPECT_EQ(kv_stage_model_problem(stage, model), "");
  stage.layers = 4;
  stage.kv_heads = 8;
  EXPECT_EQ(kv_stage_model_problem(stage, model),
            "it is the KV of a model of 4 layers x 8 KV heads x 16 dims, this engine's model has "
            "8 x 4 x 16");
  stage = KvStage{};
  stage.layers = 8;
  stage.kv_heads = 4;
  stage.head_dim = 32;
  EXPECT_NE(kv_stage_model_problem(stage, model), "");
}

}  // namespace
}  // namespace headway::serving

namespace headway::serving {
namespace {

// What a KV transport writes into: the object exists from construction, is removed unless the
// stage was committed, and its memory is the blocks back to back.
TEST(KvStageWriter, RemovesItsObjectUnlessCommitted) {
  const std::string dropped = kv_stage_name(0, 515151);
  {
    KvStageWriter writer(dropped, 3, 64);
    const hw_memory_desc memory = writer.memory();
    EXPECT_EQ(memory.kind, HW_MEMORY_HOST);
    EXPECT_EQ(memory.bytes, 3u * 64u);
    EXPECT_EQ(memory.block_bytes, 64u);
    EXPECT_EQ(memory.block_stride, 64u);
    ASSERT_NE(memory.base, nullptr);
    std::memset(memory.base, 7, memory.bytes);
    EXPECT_TRUE(kv_stage_is_here(dropped));
  }
  EXPECT_FALSE(kv_stage_is_here(dropped));

  const std::string kept = kv_stage_name(0, 515152);
  KvStage stage;
  {
    KvStageWriter writer(kept, 2, 32);
    std::memset(writer.memory().base, 9, 64);
    stage = writer.commit(/*computed_tokens=*/20, /*block_size=*/16);
  }
  EXPECT_TRUE(kv_stage_is_here(kept));
  EXPECT_EQ(stage.shm_name, kept);
  EXPECT_EQ(stage.block_count, 2u);
  EXPECT_EQ(stage.block_bytes, 32u);
  EXPECT_EQ(kv_stage_layout_problem(stage), "");
  // What a reader sees is what was written.
  KvStageReader reader(stage);
  ASSERT_EQ(reader.error(), "");
  const hw_memory_desc memory = reader.memory();
  ASSERT_NE(memory.base, nullptr);
  EXPECT_EQ(memory.bytes, 64u);
  EXPECT_EQ(static_cast<const unsigned char*>(memory.base)[63], 9);
  discard_kv_stage(kept);
}

TEST(KvStageWriter, ANameInUseIsAnErrorThatLeavesTheOtherObjectAlone) {
  const std::string name = kv_stage_name(0, 515153);
  KvStageWriter first(name, 1, 64);
  try {
    KvStageWriter second(name, 1, 64);
    ADD_FAILURE() << "a second writer took " << name;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  EXPECT_TRUE(kv_stage_is_here(name));  // the first writer's object
}

TEST(KvStageReader, ReportsAStageItCannotReadWithoutABase) {
  KvStage gone{kv_stage_name(0, 515154), 16, 1, 64, 16};
  KvStageReader missing(gone);
  EXPECT_NE(missing.error().find("No such file"), std::string::npos) << missing.error();
  EXPECT_EQ(missing.memory().base, nullptr);

  KvStage fetched = gone;
  fetched.fetched = std::make_shared<const std::vector<unsigned char>>(100, 1);
  KvStageReader short_fetch(fetched);
  EXPECT_NE(short_fetch.error().find("100 bytes were fetched"), std::string::npos)
      << short_fetch.error();
  EXPECT_EQ(short_fetch.memory().base, nullptr);

  fetched.fetched = std::make_shared<const std::vector<unsigned char>>(64, 5);
  KvStageReader whole(fetched);
  EXPECT_EQ(whole.error(), "");
  EXPECT_EQ(whole.memory().base, fetched.fetched->data());
  EXPECT_EQ(whole.memory().bytes, 64u);
}

}  // namespace
}  // namespace headway::serving
