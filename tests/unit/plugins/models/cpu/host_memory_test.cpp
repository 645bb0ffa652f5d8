// What the cpu model holds its KV cache to: MemAvailable, and every memory cgroup level the process
// is under (v2 and v1), each limit less its use without its page cache. Read from a /proc and
// /sys tree the test writes.
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

// A limit two levels up (a systemd slice, a Slurm job) counts, less what the cgroup uses, its page
// cache (the mapped checkpoint, active or not) and reclaimable slab counted as free; the least
// limit wins.
TEST_F(HostMemoryTest, EveryLevelAboveTheProcessesCgroupV2CountsLessItsUse) {
  write("proc/self/cgroup", "0::/job/step/task\n");
  write("sys/fs/cgroup/memory.max", std::to_string(12 * kGiB) + "\n");
  write("sys/fs/cgroup/memory.current", std::to_string(2 * kGiB) + "\n");
  write("sys/fs/cgroup/job/memory.max", std::to_string(8 * kGiB) + "\n");
  write("sys/fs/cgroup/job/memory.current", std::to_string(5 * kGiB) + "\n");
  write("sys/fs/cgroup/job/memory.stat",
        "anon 1\nactive_file " + std::to_string(kGiB / 4) + "\ninactive_file " +
            std::to_string(kGiB / 2) + "\nslab_reclaimable " + std::to_string(kGiB / 4) + "\n");
  write("sys/fs/cgroup/job/step/memory.max", "max\n");
  write("sys/fs/cgroup/job/step/task/memory.max", "max\n");
  const auto memory = host_memory(root_);
  ASSERT_TRUE(memory);
  EXPECT_EQ(memory->available_bytes, 4 * kGiB);  // the job's 8 - (5 - 1); the root leaves 10
  EXPECT_NE(memory->source.find("job/memory.max"), std::string::npos) << memory->source;
  // A limit at the process's own level, lower still.
  write("sys/fs/cgroup/job/step/task/memory.max", std::to_string(3 * kGiB) + "\n");
  write("sys/fs/cgroup/job/step/task/memory.current", "0\n");
  EXPECT_EQ(host_memory(root_)->available_bytes, 3 * kGiB);
}

// A container sees its own cgroup as the mount's root ("0::/" inside its namespace).
TEST_F(HostMemoryTest, AContainersLimitAtTheMountsRootCounts) {
  write("proc/self/cgroup", "0::/\n");
  write("sys/fs/cgroup/memory.max", std::to_string(6 * kGiB) + "\n");
  write("sys/fs/cgroup/memory.current", std::to_string(kGiB) + "\n");
  EXPECT_EQ(host_memory(root_)->available_bytes, 5 * kGiB);
}

// v1: each level's memory.limit_in_bytes: a Slurm job's limit above two task cgroups counts what
// both use. A level this process cannot see (a container's path under the host's hierarchy) is
// skipped; "no limit" is 2^63 rounded down to a page.
TEST_F(HostMemoryTest, CgroupV1CountsEveryVisibleLevel) {
  write("proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/slurm/job/task_0\n");
  write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  write("sys/fs/cgroup/memory/slurm/job/memory.limit_in_bytes", std::to_string(6 * kGiB));
  write("sys/fs/cgroup/memory/slurm/job/memory.usage_in_bytes", std::to_string(4 * kGiB));
  write("sys/fs/cgroup/memory/slurm/job/memory.stat",
        "total_active_file 0\ntotal_inactive_file " + std::to_string(kGiB) + "\n");
  write("sys/fs/cgroup/memory/slurm/job/task_0/memory.limit_in_bytes", "9223372036854771712\n");
  write("sys/fs/cgroup/memory/slurm/job/task_0/memory.usage_in_bytes", std::to_string(kGiB));
  EXPECT_EQ(host_memory(root_)->available_bytes, 3 * kGiB);  // 6 - (4 - 1)
  fs::remove_all(root_ / "sys/fs/cgroup/memory/slurm");
  write("sys/fs/cgroup/memory/memory.limit_in_bytes", std::to_string(2 * kGiB));
  EXPECT_EQ(host_memory(root_)->available_bytes, 2 * kGiB);
}

// A path that leaves the mount (the process outside its cgroup namespace's root) reads the mount
// alone, never a directory beside it.
TEST_F(HostMemoryTest, APathOutsideTheMountReadsNothingBesideIt) {
  write("proc/self/cgroup", "0::/../x\n");
  write("sys/fs/x/memory.max", "1\n");
  write("sys/fs/cgroupx/memory.max", "1\n");
  EXPECT_EQ(host_memory(root_)->available_bytes, 16 * kGiB);
}

TEST_F(HostMemoryTest, NoMeminfoNoFigure) {
  fs::remove(root_ / "proc/meminfo");
  EXPECT_FALSE(host_memory(root_));
}

}  // namespace
}  // namespace headway::models::cpu
