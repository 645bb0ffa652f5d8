// What the cpu model holds its KV cache to: MemAvailable, and the cgroups the process is in (v2 at
// every level, v1 through hierarchical_memory_limit), each less its use without reclaimable page
// cache. Read from a /proc and /sys tree the test writes.
#include "host_memory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace headway::models::cpu {
namespace {

namespace fs = std::filesystem;

class HostMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    root_ = fs::temp_directory_path() / ("headway_host_memory_" + std::to_string(random()));
    write("proc/meminfo", "MemTotal:       33554432 kB\nMemAvailable:   16777216 kB\n");  // 16 GiB
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& file, const std::string& text) {
    fs::create_directories((root_ / file).parent_path());
    std::ofstream(root_ / file) << text;
  }

  fs::path root_;
  static constexpr uint64_t kGiB = uint64_t{1} << 30;
};

TEST_F(HostMemoryTest, WithoutACgroupLimitItIsMemAvailable) {
  write("proc/self/cgroup", "0::/\n");
  write("sys/fs/cgroup/memory.max", "max\n");
  const auto memory = host_memory(root_);
  ASSERT_TRUE(memory);
  EXPECT_EQ(memory->available_bytes, 16 * kGiB);
  EXPECT_EQ(memory->source, "MemAvailable in /proc/meminfo");
}

// A limit two levels up (a systemd slice, a Slurm job) counts, less what the cgroup uses, its
// inactive page cache (the mapped checkpoint) counted as free.
TEST_F(HostMemoryTest, ALimitAnywhereAboveTheProcessesCgroupV2CountsLessItsUse) {
  write("proc/self/cgroup", "0::/job/step/task\n");
  write("sys/fs/cgroup/job/memory.max", std::to_string(8 * kGiB) + "\n");
  write("sys/fs/cgroup/job/memory.current", std::to_string(5 * kGiB) + "\n");
  write("sys/fs/cgroup/job/memory.stat", "anon 1\ninactive_file " + std::to_string(kGiB) + "\n");
  write("sys/fs/cgroup/job/step/memory.max", "max\n");
  write("sys/fs/cgroup/job/step/task/memory.max", "max\n");
  const auto memory = host_memory(root_);
  ASSERT_TRUE(memory);
  EXPECT_EQ(memory->available_bytes, 4 * kGiB);  // 8 - (5 - 1)
  EXPECT_NE(memory->source.find("job/memory.max"), std::string::npos) << memory->source;
}

TEST_F(HostMemoryTest, CgroupV1ReadsTheHierarchicalLimitOfTheProcessesCgroup) {
  write("proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/docker/abc\n");
  write("sys/fs/cgroup/memory/docker/abc/memory.stat",
        "hierarchical_memory_limit " + std::to_string(6 * kGiB) + "\ntotal_inactive_file " +
            std::to_string(2 * kGiB) + "\n");
  write("sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", std::to_string(3 * kGiB));
  const auto memory = host_memory(root_);
  ASSERT_TRUE(memory);
  EXPECT_EQ(memory->available_bytes, 5 * kGiB);  // 6 - (3 - 2)
}

// Inside a container the process's path is not under the mount: the mount's root is its cgroup.
// v1 writes "no limit" as 2^63 rounded down to a page.
TEST_F(HostMemoryTest, CgroupV1FallsBackToTheMountsRootAndKnowsNoLimit) {
  write("proc/self/cgroup", "4:memory:/docker/abc\n");
  write("sys/fs/cgroup/memory/memory.stat", "hierarchical_memory_limit 9223372036854771712\n");
  EXPECT_EQ(host_memory(root_)->available_bytes, 16 * kGiB);
  write("sys/fs/cgroup/memory/memory.stat",
        "hierarchical_memory_limit " + std::to_string(2 * kGiB) + "\n");
  write("sys/fs/cgroup/memory/memory.usage_in_bytes", "0\n");
  EXPECT_EQ(host_memory(root_)->available_bytes, 2 * kGiB);
}

TEST_F(HostMemoryTest, NoMeminfoNoFigure) {
  fs::remove(root_ / "proc/meminfo");
  EXPECT_FALSE(host_memory(root_));
}

}  // namespace
}  // namespace headway::models::cpu
