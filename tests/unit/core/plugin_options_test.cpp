#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/plugin_options.h>
#include <headway/core/plugin_registry.h>
#include <toml++/toml.h>

#include <filesystem>
#include <functional>
#include <headway/sdk/options.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace headway::core {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string_view sv(hw_str s) { return s.data ? std::string_view(s.data, s.size) : ""; }

// The test_good_scheduler plugin's descriptor: max_num_seqs int [1, 1024] = 8, budget int
// [1, 1048576] = 512, ratio double [0, 1] = 0.5, scale double [-10, 10] = 2, verbose bool = false,
// label string = "none", policy enum {fcfs, priority, lifo} = "fcfs".
const hw_plugin_descriptor& good() {
  static PluginRegistry registry;
  static const LoadedPlugin& plugin =
      registry.load_path(fs::path(HEADWAY_TEST_PLUGIN_DIR) / "test_good_scheduler.so");
  return *plugin.descriptor;
}

const hw_option_value& value(const PluginOptions& options, std::string_view key) {
  for (const hw_option_value& v : options.values()) {
    if (sv(v.key) == key) return v;
  }
  throw std::runtime_error("no option " + std::string(key));
}

PluginOptions parse(const std::string& text, const std::string& where = "deploy.toml: opts") {
  toml::table table = toml::parse(std::string_view(text), std::string_view("deploy.toml"));
  return PluginOptions::from_toml(good(), &table, where);
}

Error expect_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error was thrown";
  return Error("(none)");
}

void expect_defaults(const PluginOptions& o) {
  ASSERT_EQ(o.values().size(), 7u);
  ASSERT_EQ(o.view()->count, 7u);
  EXPECT_EQ(o.view()->values, o.values().data());
  // Schema order.
  const char* keys[] = {"max_num_seqs", "budget", "ratio", "scale", "verbose", "label", "policy"};
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(sv(o.values()[i].key), keys[i]);
  EXPECT_EQ(value(o, "max_num_seqs").type, HW_OPTION_INT);
  EXPECT_EQ(value(o, "max_num_seqs").int_value, 8);
  EXPECT_EQ(value(o, "budget").int_value, 512);
  EXPECT_EQ(value(o, "ratio").type, HW_OPTION_DOUBLE);
  EXPECT_DOUBLE_EQ(value(o, "ratio").double_value, 0.5);
  EXPECT_DOUBLE_EQ(value(o, "scale").double_value, 2.0);
  EXPECT_EQ(value(o, "verbose").type, HW_OPTION_BOOL);
  EXPECT_EQ(value(o, "verbose").int_value, 0);
  EXPECT_EQ(value(o, "label").type, HW_OPTION_STRING);
  EXPECT_EQ(sv(value(o, "label").string_value), "none");
  EXPECT_EQ(value(o, "policy").type, HW_OPTION_ENUM);
  EXPECT_EQ(sv(value(o, "policy").string_value), "fcfs");
}

TEST(PluginOptions, DefaultsWhenTheTableIsMissing) {
  expect_defaults(PluginOptions::from_toml(good(), nullptr, "x"));
}

TEST(PluginOptions, DefaultsWhenTheTableIsEmpty) { expect_defaults(parse("")); }

TEST(PluginOptions, ValuesOverrideDefaults) {
  PluginOptions o = parse(
      "max_num_seqs = 1024\nratio = 0.25\nverbose = true\nlabel = 'hello'\npolicy = 'lifo'\n");
  EXPECT_EQ(value(o, "max_num_seqs").int_value, 1024);
  EXPECT_EQ(value(o, "budget").int_value, 512);  // not given: default
  EXPECT_DOUBLE_EQ(value(o, "ratio").double_value, 0.25);
  EXPECT_EQ(value(o, "verbose").int_value, 1);
  EXPECT_EQ(sv(value(o, "label").string_value), "hello");
  EXPECT_EQ(sv(value(o, "policy").string_value), "lifo");
}

TEST(PluginOptions, ViewSurvivesMoves) {
  std::vector<PluginOptions> all;
  for (int i = 0; i < 20; ++i) {
    all.push_back(parse("label = 'label number " + std::to_string(i) + " long enough to heap'\n"));
  }
  PluginOptions moved = std::move(all[7]);
  EXPECT_EQ(sv(value(moved, "label").string_value), "label number 7 long enough to heap");
  EXPECT_EQ(sv(moved.view()->values[5].string_value), "label number 7 long enough to heap");
  EXPECT_EQ(sv(moved.view()->values[0].key), "max_num_seqs");
  EXPECT_EQ(sv(value(all[19], "label").string_value), "label number 19 long enough to heap");
}

TEST(PluginOptions, UnknownKeyNamesTheKeyThePluginAndTheAllowedKeys) {
  Error e = expect_error([] { parse("budget = 4\n\nmax_num_seq = 3\n"); });
  const std::string m = e.what();
  EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
  EXPECT_THAT(m, HasSubstr("deploy.toml: opts"));
  EXPECT_THAT(m, HasSubstr("unknown key 'max_num_seq'"));
  EXPECT_THAT(m, HasSubstr("(line 3)"));
  EXPECT_THAT(m, HasSubstr("org.headway.test.good_scheduler"));
  EXPECT_THAT(m, HasSubstr("allowed: max_num_seqs, budget, ratio, scale, verbose, label, policy"));
}

TEST(PluginOptions, UnknownKeyForAPluginWithoutOptions) {
  hw_plugin_descriptor d{};
  d.name = headway::sdk::make_str("org.example.none");
  toml::table table = toml::parse("anything = 1\n");
  Error e = expect_error([&] { PluginOptions::from_toml(d, &table, "where"); });
  EXPECT_THAT(e.what(), HasSubstr("unknown key 'anything'"));
  EXPECT_THAT(e.what(), HasSubstr("allowed: none"));
  EXPECT_EQ(PluginOptions::from_toml(d, nullptr, "where").values().size(), 0u);
}

TEST(PluginOptions, WrongTypes) {
  struct Case {
    const char* text;
    const char* expected;
  } cases[] = {
      {"max_num_seqs = '8'", "opts.max_num_seqs: expected integer in [1, 1024]"},
      {"max_num_seqs = 8.0", "opts.max_num_seqs: expected integer in [1, 1024]"},
      {"ratio = 'half'", "opts.ratio: expected number in [0, 1]"},
      {"ratio = true", "opts.ratio: expected number in [0, 1]"},
      {"verbose = 1", "opts.verbose: expected bool"},
      {"verbose = 'yes'", "opts.verbose: expected bool"},
      {"label = 3", "opts.label: expected string"},
      {"label = ['a']", "opts.label: expected string"},
      {"policy = 1", "opts.policy: expected one of fcfs, priority, lifo"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    Error e = expect_error([&] { parse(c.text); });
    EXPECT_THAT(e.what(), HasSubstr(c.expected));
    EXPECT_THAT(e.what(), HasSubstr("(line 1)"));
  }
}

TEST(PluginOptions, IntOutOfRangeShowsTheRange) {
  for (const char* text : {"max_num_seqs = 0", "max_num_seqs = 1025", "max_num_seqs = -5"}) {
    SCOPED_TRACE(text);
    Error e = expect_error([&] { parse(text); });
    EXPECT_THAT(e.what(), HasSubstr("deploy.toml: opts.max_num_seqs"));
    EXPECT_THAT(e.what(), HasSubstr("[1, 1024]"));
    EXPECT_THAT(e.what(), HasSubstr(std::string("got ") + (text + 15)));
  }
  // The bounds are inclusive.
  EXPECT_EQ(value(parse("max_num_seqs = 1"), "max_num_seqs").int_value, 1);
  EXPECT_EQ(value(parse("budget = 1048576"), "budget").int_value, 1048576);
}

// From helper-201's review: integers were compared with their bounds as doubles, in which
// 2^62 + 1 is 2^62, so it passed a maximum of 2^62.
TEST(PluginOptions, IntBoundsAreComparedAsIntegers) {
  static constexpr hw_option_spec kSeed[] = {
      sdk::int_option("seed", 0, -(int64_t{1} << 62), int64_t{1} << 62, "A seed.")};
  static const hw_plugin_descriptor descriptor{sizeof(hw_plugin_descriptor),
                                               HW_ABI_MAJOR,
                                               HW_ABI_MINOR,
                                               HW_KIND_ROUTER,
                                               HW_STR_LITERAL("org.headway.test.seeded"),
                                               HW_STR_LITERAL("seeded"),
                                               HW_STR_LITERAL("0.0.1"),
                                               HW_STR_LITERAL("an option near 2^62"),
                                               kSeed,
                                               1,
                                               nullptr};
  const auto seed = [&](const std::string& text) {
    toml::table table = toml::parse(std::string_view(text), std::string_view("deploy.toml"));
    return value(PluginOptions::from_toml(descriptor, &table, "deploy.toml: opts"), "seed")
        .int_value;
  };
  EXPECT_EQ(seed("seed = 4611686018427387904"), int64_t{1} << 62);  // inclusive
  EXPECT_EQ(seed("seed = -4611686018427387904"), -(int64_t{1} << 62));
  for (const char* text : {"seed = 4611686018427387905", "seed = -4611686018427387905"}) {
    SCOPED_TRACE(text);
    EXPECT_THAT(expect_error([&] { seed(text); }).what(), HasSubstr("deploy.toml: opts.seed"));
  }
}

TEST(PluginOptions, DoubleAcceptsAnIntegerLiteral) {
  PluginOptions o = parse("ratio = 1\nscale = -3\n");
  EXPECT_EQ(value(o, "ratio").type, HW_OPTION_DOUBLE);
  EXPECT_DOUBLE_EQ(value(o, "ratio").double_value, 1.0);
  EXPECT_DOUBLE_EQ(value(o, "scale").double_value, -3.0);
}

TEST(PluginOptions, DoubleOutOfRangeOrNotANumber) {
  for (const char* text : {"ratio = 1.5", "ratio = 2", "ratio = -0.01", "ratio = nan",
                           "scale = inf", "scale = -inf"}) {
    SCOPED_TRACE(text);
    Error e = expect_error([&] { parse(text); });
    EXPECT_THAT(e.what(), HasSubstr("expected number in ["));
  }
  Error e = expect_error([] { parse("ratio = 1.5"); });
  EXPECT_THAT(e.what(), HasSubstr("opts.ratio: expected number in [0, 1] (line 1), got 1.5"));
}

TEST(PluginOptions, EnumNotAllowedListsTheAllowedValues) {
  Error e = expect_error([] { parse("\n\npolicy = 'random'\n"); });
  EXPECT_THAT(e.what(), HasSubstr("deploy.toml: opts.policy"));
  EXPECT_THAT(e.what(), HasSubstr("one of fcfs, priority, lifo"));
  EXPECT_THAT(e.what(), HasSubstr("(line 3)"));
  EXPECT_THAT(e.what(), HasSubstr("random"));
  // Enum values are case-sensitive.
  expect_error([] { parse("policy = 'FCFS'"); });
}

TEST(PluginOptions, LineNumbersPointAtTheOffendingValue) {
  Error e = expect_error([] { parse("budget = 4\nratio = 0.5\nlabel = 'ok'\n\n\nbudget2 = 1\n"); });
  EXPECT_THAT(e.what(), HasSubstr("(line 6)"));
  Error f = expect_error([] { parse("budget = 4\nratio = 0.5\n\nmax_num_seqs = 5000\n"); });
  EXPECT_THAT(f.what(), HasSubstr("(line 4)"));
}

TEST(PluginOptions, DescribeAllowed) {
  const hw_plugin_descriptor& d = good();
  EXPECT_EQ(describe_allowed(d.options[0]), "integer in [1, 1024]");
  EXPECT_EQ(describe_allowed(d.options[2]), "number in [0, 1]");
  EXPECT_EQ(describe_allowed(d.options[3]), "number in [-10, 10]");
  EXPECT_EQ(describe_allowed(d.options[4]), "bool");
  EXPECT_EQ(describe_allowed(d.options[5]), "string");
  EXPECT_EQ(describe_allowed(d.options[6]), "one of fcfs, priority, lifo");
  hw_option_spec half_open = d.options[0];
  half_open.has_max = 0;
  EXPECT_EQ(describe_allowed(half_open), "integer in [1, inf]");
  hw_option_spec seed = d.options[0];
  seed.min_value = 0;
  seed.max_value = static_cast<double>(int64_t{1} << 62);  // the sim and cuda models' seeds
  EXPECT_EQ(describe_allowed(seed), "integer in [0, 4611686018427387904]");
}

TEST(PluginOptions, EnumValues) {
  const hw_plugin_descriptor& d = good();
  EXPECT_EQ(enum_values(d, "policy"), (std::vector<std::string>{"fcfs", "priority", "lifo"}));
  EXPECT_TRUE(enum_values(d, "max_num_seqs").empty());  // an integer option
  EXPECT_TRUE(enum_values(d, "no_such_option").empty());
}

TEST(OptionsTemplate, ContainsEveryKeyItsDocAndItsDefault) {
  const std::string t = options_template(good(), "engines.scheduler.options");
  EXPECT_THAT(t, HasSubstr("[engines.scheduler.options]\n"));
  EXPECT_THAT(t, HasSubstr("# Requests running at once.\n"));
  EXPECT_THAT(t, HasSubstr("# integer in [1, 1024]\n"));
  EXPECT_THAT(t, HasSubstr("max_num_seqs = 8\n"));
  EXPECT_THAT(t, HasSubstr("# Token budget of one step.\n"));
  EXPECT_THAT(t, HasSubstr("budget = 512\n"));
  EXPECT_THAT(t, HasSubstr("# A fraction, for double tests.\n"));
  EXPECT_THAT(t, HasSubstr("ratio = 0.5\n"));
  EXPECT_THAT(t, HasSubstr("# A double whose default is integral.\n"));
  EXPECT_THAT(t, HasSubstr("scale = 2.0\n"));
  EXPECT_THAT(t, HasSubstr("# Log every step.\n"));
  EXPECT_THAT(t, HasSubstr("verbose = false\n"));
  EXPECT_THAT(t, HasSubstr("# A free-form label.\n"));
  EXPECT_THAT(t, HasSubstr("label = \"none\"\n"));
  EXPECT_THAT(t, HasSubstr("# Queue order.\n"));
  EXPECT_THAT(t, HasSubstr("# one of fcfs, priority, lifo\n"));
  EXPECT_THAT(t, HasSubstr("policy = \"fcfs\"\n"));
}

TEST(OptionsTemplate, ParsesBackToTheDefaults) {
  const std::string t = options_template(good(), "engines.scheduler.options");
  toml::table root;
  try {
    root = toml::parse(std::string_view(t), std::string_view("template.toml"));
  } catch (const toml::parse_error& e) {
    FAIL() << "template is not valid TOML: " << e.description() << "\n" << t;
  }
  const toml::table* table = root["engines"]["scheduler"]["options"].as_table();
  ASSERT_NE(table, nullptr) << t;
  EXPECT_EQ(table->size(), 7u);
  for (uint32_t i = 0; i < good().option_count; ++i) {
    EXPECT_TRUE(table->contains(sv(good().options[i].key))) << sv(good().options[i].key);
  }
  // Through the validator: the template's values are exactly the defaults.
  expect_defaults(PluginOptions::from_toml(good(), table, "template.toml"));
}

TEST(OptionsTemplate, PluginWithoutOptions) {
  hw_plugin_descriptor d{};
  d.name = headway::sdk::make_str("org.example.none");
  const std::string t = options_template(d, "router.options");
  EXPECT_THAT(t, HasSubstr("[router.options]"));
  EXPECT_THAT(t, HasSubstr("no options"));
  toml::table root = toml::parse(t);
  ASSERT_NE(root["router"]["options"].as_table(), nullptr);
  EXPECT_TRUE(root["router"]["options"].as_table()->empty());
}

// String defaults are free text chosen by plugin authors; a Windows path or a regex holds
// backslashes and a message may hold quotes. The template must stay valid TOML that parses back to
// the same default.
// KNOWN BUG (core/src/plugin_options.cpp, default_text()): string and enum defaults are written as
// "\"" + value + "\"" without TOML escaping, so this default produces `pattern = "C:\models "x""`,
// which is not valid TOML. Left failing on purpose until default_text() escapes '\\', '"' and
// control characters.
TEST(OptionsTemplate, StringDefaultsAreEscaped) {
  static constexpr hw_option_spec kOptions[] = {
      headway::sdk::string_option("pattern", "C:\\models \"x\"", "Where the files are."),
  };
  hw_plugin_descriptor d{};
  d.name = headway::sdk::make_str("org.example.escape");
  d.options = kOptions;
  d.option_count = 1;
  const std::string t = options_template(d, "options");
  toml::table root;
  try {
    root = toml::parse(std::string_view(t), std::string_view("template.toml"));
  } catch (const toml::parse_error& e) {
    FAIL() << "template is not valid TOML: " << e.description() << "\n" << t;
  }
  EXPECT_EQ(root["options"]["pattern"].value_or(std::string()), "C:\\models \"x\"");
}

}  // namespace
}  // namespace headway::core
