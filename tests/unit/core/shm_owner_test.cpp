// sdk/shm_owner.hpp: the owner tag in a shared-memory object's name, and the sweep of objects
// whose owner has exited.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <headway/sdk/shm_owner.hpp>
#include <string>

namespace {

using headway::sdk::own_pid_namespace;
using headway::sdk::own_shm_owner_tag;
using headway::sdk::parse_shm_owner;
using headway::sdk::remove_orphaned_shm_objects;
using headway::sdk::shm_owner_exited;
using headway::sdk::ShmOwner;

constexpr char kPrefix[] = "/headway-shm-owner-test-";

// The pid of a child that has exited and been reaped: no process has it (until it is reused).
pid_t exited_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

bool object_exists(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::string make_object(const std::string& owner_tag, const std::string& rest) {
  const std::string name = kPrefix + owner_tag + rest;
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  EXPECT_GE(fd, 0) << name;
  if (fd >= 0) ::close(fd);
  return name;
}

TEST(ShmOwner, OwnTagParsesBackToThisProcess) {
  ASSERT_NE(own_pid_namespace(), 0u) << "/proc/self/ns/pid is readable on Linux";
  const auto owner = parse_shm_owner(own_shm_owner_tag() + "0123abcd-7");
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->pid_namespace, own_pid_namespace());
  EXPECT_EQ(owner->pid, ::getpid());
  EXPECT_FALSE(shm_owner_exited(*owner));
}

TEST(ShmOwner, RefusesTextThatDoesNotBeginWithAnOwner) {
  EXPECT_FALSE(parse_shm_owner("").has_value());
  EXPECT_FALSE(parse_shm_owner("4026531836").has_value());
  EXPECT_FALSE(parse_shm_owner("4026531836-").has_value());
  EXPECT_FALSE(parse_shm_owner("4026531836-12").has_value()) << "no '-' after the pid";
  EXPECT_FALSE(parse_shm_owner("4026531836-0-x").has_value()) << "pid 0";
  EXPECT_FALSE(parse_shm_owner("4026531836--5-x").has_value());
  EXPECT_FALSE(parse_shm_owner("abc-12-x").has_value());
  EXPECT_FALSE(parse_shm_owner("99999999999999999999999-1-x").has_value()) << "overflow";
}

TEST(ShmOwner, OnlyAnOwnerInThisPidNamespaceWithNoProcessHasExited) {
  const pid_t gone = exited_pid();
  EXPECT_TRUE(shm_owner_exited(ShmOwner{own_pid_namespace(), gone}));
  EXPECT_FALSE(shm_owner_exited(ShmOwner{own_pid_namespace() + 1, gone}))
      << "another namespace's pid says nothing about this one's processes";
  EXPECT_FALSE(shm_owner_exited(ShmOwner{0, gone})) << "unknown namespace";
  EXPECT_FALSE(shm_owner_exited(ShmOwner{own_pid_namespace(), 1})) << "pid 1 runs";
}

TEST(RemoveOrphanedShmObjects, RemovesOnlyObjectsOfExitedOwners) {
  const pid_t gone = exited_pid();
  const std::string ns = std::to_string(own_pid_namespace());
  const std::string orphan = make_object(ns + "-" + std::to_string(gone) + "-", "a");
  const std::string mine = make_object(own_shm_owner_tag(), "b");
  const std::string other_namespace =
      make_object(std::to_string(own_pid_namespace() + 1) + "-" + std::to_string(gone) + "-", "c");
  const std::string untagged = make_object("", "no-owner");

  EXPECT_EQ(remove_orphaned_shm_objects("headway-shm-owner-test-"), 0u)
      << "a prefix without its '/' is refused";
  EXPECT_EQ(remove_orphaned_shm_objects(kPrefix), 1u);
  EXPECT_FALSE(object_exists(orphan));
  EXPECT_TRUE(object_exists(mine));
  EXPECT_TRUE(object_exists(other_namespace));
  EXPECT_TRUE(object_exists(untagged));
  for (const std::string& name : {mine, other_namespace, untagged}) ::shm_unlink(name.c_str());
}

}  // namespace
