// core::write_output_file, which reports and cost files go through: a complete file or an error
// that names it, never a truncated file in place of the previous one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/file_output.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace headway::core {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string read(const fs::path& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The message write_output_file throws, or "" when it writes.
std::string error_of(const fs::path& file, const std::string& text) {
  try {
    write_output_file(file, text, "the report");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class FileOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("file_output_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Nothing but `names` in the directory: no partial file left behind.
  void expect_only(std::initializer_list<std::string> names) const {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      found.push_back(entry.path().filename().string());
    }
    EXPECT_THAT(found, ::testing::UnorderedElementsAreArray(names));
  }
  fs::path dir_;
};

TEST_F(FileOutput, WritesAndReplacesWholeFiles) {
  const fs::path file = dir_ / "report.json";
  EXPECT_EQ(error_of(file, "first\n"), "");
  EXPECT_EQ(read(file), "first\n");
  EXPECT_EQ(error_of(file, "second, longer\n"), "");
  EXPECT_EQ(read(file), "second, longer\n");
  expect_only({"report.json"});
}

TEST_F(FileOutput, ALinkIsWrittenThroughNotReplaced) {
  const fs::path target = dir_ / "target.json";
  ASSERT_EQ(error_of(target, "old\n"), "");
  fs::create_symlink(target, dir_ / "link.json");
  EXPECT_EQ(error_of(dir_ / "link.json", "new\n"), "");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_EQ(read(target), "new\n");
  expect_only({"target.json", "link.json"});
}

TEST_F(FileOutput, AFailedWriteNamesTheFileAndKeepsThePreviousOne) {
  const fs::path file = dir_ / "cost.toml";
  ASSERT_EQ(error_of(file, "old\n"), "");
  // A file-size limit makes the write fail part-way (EFBIG), as a full disk would.
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &before), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 8;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message = error_of(file, std::string(4096, 'x'));
  ::setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_THAT(message, HasSubstr("cost.toml: writing the report failed: File too large"));
  EXPECT_EQ(read(file), "old\n");
  expect_only({"cost.toml"});
}

TEST_F(FileOutput, DevicesAreWrittenInPlaceAndTheirErrorsReported) {
  EXPECT_THAT(error_of("/dev/full", "x"),
              HasSubstr("/dev/full: writing the report failed: No space left on device"));
  EXPECT_EQ(error_of("/dev/null", "x"), "");
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  // A directory is not replaced by a file.
  fs::create_directory(dir_ / "sub");
  EXPECT_THAT(error_of(dir_ / "sub", "x"), HasSubstr("sub: writing the report failed"));
  EXPECT_TRUE(fs::is_directory(dir_ / "sub"));
}

}  // namespace
}  // namespace headway::core
