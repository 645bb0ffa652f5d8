// Reading input files: an API key file for `serve` and `bench --api-key-file`, and a checkpoint's
// JSON files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

std::string json_file_error(const std::filesystem::path& file) {
  try {
    read_json_file(file);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(JsonFile, GivesTheParsedDocument) {
  const auto file = std::filesystem::temp_directory_path() / "headway_json_file_test.json";
  { std::ofstream(file) << R"({"eos_token_id": [1, 2], "name": "x"})"; }
  const nlohmann::json j = read_json_file(file);
  EXPECT_EQ(j.at("eos_token_id"), nlohmann::json::array({1, 2}));
  EXPECT_EQ(j.at("name"), "x");
  std::filesystem::remove(file);
}

TEST(JsonFile, EachFailureNamesTheFileAndWhy) {
  using ::testing::HasSubstr;
  const auto file = std::filesystem::temp_directory_path() / "headway_json_file_test.json";
  std::filesystem::remove(file);
  EXPECT_THAT(json_file_error(file), HasSubstr(file.string() + ": cannot open: no such file"));
  EXPECT_THAT(json_file_error(std::filesystem::temp_directory_path()),
              HasSubstr(": cannot open: a directory, not a file"));
  { std::ofstream(file) << R"({"eos_token_id": [1, 2)"; }
  EXPECT_THAT(json_file_error(file), HasSubstr(file.string() + ": invalid JSON: "));
  std::filesystem::remove(file);
}

// From helper-151's fuzzer: a number past a double's range is nlohmann's out_of_range, which
// escaped as "headway: internal error: ..." (exit 2); a FIFO blocked open() for ever.
TEST(JsonFile, ANumberPastADoubleOrAFifoIsNamed) {
  using ::testing::AllOf;
  using ::testing::HasSubstr;
  const auto file = std::filesystem::temp_directory_path() / "headway_json_file_test.json";
  { std::ofstream(file) << R"({"vocab_size": 1e400})"; }
  EXPECT_THAT(json_file_error(file),
              AllOf(HasSubstr(file.string() + ": invalid JSON: "), HasSubstr("number overflow")));
  std::filesystem::remove(file);
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  EXPECT_THAT(json_file_error(file),
              HasSubstr(file.string() + ": cannot open: not a regular file"));
  EXPECT_THAT(json_file_error(file),
              HasSubstr(file.string() + ": cannot open: not a regular file"));
  std::filesystem::remove(file);
}

// From helper-201's review: nlohmann parses a million '[' without trouble, but a copy or a dump()
// of the value (an error message naming a bad "hidden_size") recurses once per level and overflows
// the stack. Such a file is refused before it is parsed; 128 levels are still read.
TEST(JsonFile, ValuesNestedPastTheLimitAreRefusedBeforeParsing) {
  using ::testing::HasSubstr;
  const auto file = std::filesystem::temp_directory_path() / "headway_json_file_test.json";
  const auto nested = [](size_t levels) {
    return R"({"hidden_size": )" + std::string(levels - 1, '[') + std::string(levels - 1, ']') +
           "}";
  };
  { std::ofstream(file) << nested(1'000'000); }
  EXPECT_THAT(json_file_error(file),
              HasSubstr(file.string() +
                        ": invalid JSON: objects and arrays nest more than 128 levels deep"));
  { std::ofstream(file) << nested(128); }
  EXPECT_EQ(json_file_error(file), "no error");
  // Brackets inside strings are text, not nesting.
  { std::ofstream(file) << R"({"chat_template": ")" + std::string(1000, '[') + R"("})"; }
  EXPECT_EQ(json_file_error(file), "no error");
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace headway::core
