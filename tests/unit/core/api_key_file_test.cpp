// Reading an API key file for `serve` and `bench --api-key-file`.
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>

#include <filesystem>
#include <fstream>

namespace headway::core {
namespace {

TEST(ApiKeyFile, GivesItsFirstLineTrimmed) {
  const auto file = std::filesystem::temp_directory_path() / "headway_api_key_test";
  { std::ofstream(file) << "  sk-123 \nsecond line\n"; }
  EXPECT_EQ(read_api_key_file(file), "sk-123");
  { std::ofstream(file) << "\n"; }
  EXPECT_THROW(read_api_key_file(file), Error);
  std::filesystem::remove(file);
  try {
    read_api_key_file(file);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  }
}

// A directory opens as a stream and failed only at the first read: `serve` said "internal error:
// basic_filebuf::underflow", `bench` that the first line held no key.
TEST(ApiKeyFile, ADirectoryIsNamedAsOne) {
  try {
    read_api_key_file(std::filesystem::temp_directory_path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read the file: a directory, not a file"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace headway::core
