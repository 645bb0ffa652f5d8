#include "headway/core/workload.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "headway/core/error.h"

namespace headway::core {
namespace {

namespace fs = std::filesystem;

// Fixture files live in tests/data/workloads. The build defines HEADWAY_TEST_DATA_DIR as the
// absolute path of tests/data; without it the tests must run from the repository root.
#ifdef HEADWAY_TEST_DATA_DIR
const fs::path kDataDir = HEADWAY_TEST_DATA_DIR;
#else
const fs::path kDataDir = "tests/data";
#endif
const fs::path kWorkloads = kDataDir / "workloads";
const fs::path kConfigs = kDataDir / ".." / ".." / "configs" / "workloads";

// Three requests of one class of fixed lengths: the head of the files that test a class key's
// errors.
const std::string kOneFixedClass = R"(
count = 3
[arrival]
process = "poisson"
rate = 1
[[classes]]
name = "chat"
share = 1
prompt = { dist = "fixed", value = 10 }
output = { dist = "fixed", value = 2 }
)";

// A scratch directory per test, removed afterwards.
class WorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("headway_workload_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `text` to <scratch>/<name> and returns its path.
  fs::path write(const std::string& text, const std::string& name = "workload.toml") {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  // Absolute path of a fixture, quoted for TOML.
  static std::string fixture(const std::string& name) {
    return "\"" + fs::absolute(kWorkloads / name).generic_string() + "\"";
  }

  // Loads `text` and expects an Error whose message contains every one of `parts`.
  void expect_error(const std::string& text, std::initializer_list<std::string> parts) {
    const fs::path p = write(text);
    try {
      load_workload(p);
      ADD_FAILURE() << "no error for:\n" << text;
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& part : parts) {
        EXPECT_NE(msg.find(part), std::string::npos) << "message: " << msg << "\nmissing: " << part;
      }
    }
  }

  fs::path dir_;
};

const char* kTwoClasses = R"(
seed = SEED
count = 20000
[arrival]
process = "poisson"
rate = 10
[[classes]]
name = "a"
share = 3
prompt = { dist = "uniform", min = 5, max = 8 }
output = { dist = "fixed", value = 7 }
[[classes]]
name = "b"
share = 1
prompt = { dist = "lognormal", mean = 1000, sigma = 0.5 }
output = { dist = "lognormal", mean = 50, sigma = 1.0, min = 10, max = 60 }
)";

std::string with_seed(int seed) {
  std::string s = kTwoClasses;
  s.replace(s.find("SEED"), 4, std::to_string(seed));
  return s;
}

void expect_sorted_with_ids(const Workload& w) {
  for (size_t i = 0; i < w.requests.size(); ++i) {
    EXPECT_EQ(w.requests[i].id, i);
    if (i > 0) {
      EXPECT_LE(w.requests[i - 1].arrival, w.requests[i].arrival);
    }
  }
}

// The files are easy to swap on a command line: the error says which is which.
TEST_F(WorkloadTest, ADeploymentGivenAsTheWorkloadIsNamedAsOne) {
  expect_error(
      "[model]\nplugin = \"sim\"\n[[engines]]\n",
      {"this is a deployment file (it has 'engines'), not a workload", "give it with --config"});
}

TEST_F(WorkloadTest, SameSeedSameRequestsDifferentSeedDifferent) {
  const Workload a = load_workload(write(with_seed(11), "a.toml"));
  const Workload b = load_workload(write(with_seed(11), "b.toml"));
  const Workload c = load_workload(write(with_seed(12), "c.toml"));
  EXPECT_EQ(a.seed, 11u);
  EXPECT_TRUE(same_requests(a, b));
  EXPECT_FALSE(same_requests(a, c));
  ASSERT_EQ(a.requests.size(), 20000u);
  expect_sorted_with_ids(a);
}

// `headway simulate --seed/--seeds` draws the same file again with another seed.
TEST_F(WorkloadTest, AGivenSeedReplacesTheFilesSeed) {
  const fs::path file = write(with_seed(11), "a.toml");
  const Workload drawn_with_12 = load_workload(file, 12);
  EXPECT_EQ(drawn_with_12.seed, 12u);
  EXPECT_TRUE(same_requests(drawn_with_12, load_workload(write(with_seed(12), "c.toml"))));
  EXPECT_FALSE(same_requests(drawn_with_12, load_workload(file)));
  EXPECT_TRUE(same_requests(load_workload(file, 11), load_workload(file)));
  EXPECT_TRUE(same_requests(parse_workload(with_seed(3), "<text>", 12), drawn_with_12));
}

// A plain trace replay draws nothing: every seed gives the same requests (a sweep refuses it).
TEST_F(WorkloadTest, ATraceReplayIsTheSameForEverySeed) {
  const fs::path file = write("[trace]\nfile = " + fixture("small_trace.csv") + "\n");
  EXPECT_TRUE(same_requests(load_workload(file, 1), load_workload(file, 2)));
  Workload shorter = load_workload(file);
  shorter.requests.pop_back();
  EXPECT_FALSE(same_requests(shorter, load_workload(file)));
}

TEST_F(WorkloadTest, SharesAndRateHonoured) {
  const Workload w = load_workload(write(with_seed(5)));
  ASSERT_EQ(w.classes.size(), 2u);
  size_t a = 0;
  for (const auto& r : w.requests) a += r.class_index == 0;
  // 3:1 -> 0.75; the standard error over 20000 draws is ~0.003.
  EXPECT_NEAR(static_cast<double>(a) / w.requests.size(), 0.75, 0.015);
  // Poisson at 10/s: mean gap 0.1 s (standard error ~0.0007).
  EXPECT_NEAR(w.requests.back().arrival / w.requests.size(), 0.1, 0.005);
  EXPECT_GT(w.requests.front().arrival, 0.0);
}

TEST_F(WorkloadTest, DistributionBounds) {
  const Workload w = load_workload(write(with_seed(9)));
  std::set<uint32_t> uniform_seen;
  std::vector<double> lognormal;
  for (const auto& r : w.requests) {
    if (r.class_index == 0) {
      EXPECT_GE(r.prompt_tokens, 5u);
      EXPECT_LE(r.prompt_tokens, 8u);
      uniform_seen.insert(r.prompt_tokens);
      EXPECT_EQ(r.output_tokens, 7u);
    } else {
      EXPECT_GE(r.output_tokens, 10u);  // clamped lognormal
      EXPECT_LE(r.output_tokens, 60u);
      EXPECT_GE(r.prompt_tokens, 1u);
      lognormal.push_back(r.prompt_tokens);
    }
  }
  EXPECT_EQ(uniform_seen, (std::set<uint32_t>{5, 6, 7, 8}));  // inclusive at both ends
  // `mean` is the mean of the lognormal: ~1000 (sd ~530, ~5000 samples -> standard error ~8);
  // its median is mean * exp(-sigma^2 / 2) = 882.5.
  ASSERT_GT(lognormal.size(), 4000u);
  double sum = 0;
  for (double v : lognormal) sum += v;
  EXPECT_NEAR(sum / lognormal.size(), 1000.0, 40.0);
  std::sort(lognormal.begin(), lognormal.end());
  EXPECT_NEAR(lognormal[lognormal.size() / 2], 882.5, 40.0);
}

TEST_F(WorkloadTest, FixedArrivalTimesCountAndDuration) {
  const std::string base = R"(
[arrival]
process = "fixed"
times = [3.0, 0, 1.5, 1.5, 10]
[[classes]]
name = "only"
share = 1
prompt = { dist = "fixed", value = 12 }
output = { dist = "fixed", value = 3 }
)";
  const Workload all = load_workload(write(base, "all.toml"));
  ASSERT_EQ(all.requests.size(), 5u);
  const double expected[] = {0, 1.5, 1.5, 3.0, 10};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(all.requests[i].arrival, expected[i]);
    EXPECT_EQ(all.requests[i].prompt_tokens, 12u);
    EXPECT_EQ(all.requests[i].output_tokens, 3u);
  }
  expect_sorted_with_ids(all);
  EXPECT_EQ(load_workload(write("count = 2\n" + base, "count.toml")).requests.size(), 2u);
  EXPECT_EQ(load_workload(write("duration = 3.0\n" + base, "dur.toml")).requests.size(), 3u);
  // One class: nothing is long.
  EXPECT_FALSE(all.has_long_requests());
}

TEST_F(WorkloadTest, DurationBoundsPoissonArrivals) {
  std::string text = with_seed(1);
  text.replace(text.find("count = 20000"), 13, "duration = 60");
  const Workload w = load_workload(write(text));
  ASSERT_FALSE(w.requests.empty());
  EXPECT_LT(w.requests.back().arrival, 60.0);
  EXPECT_NEAR(static_cast<double>(w.requests.size()), 600.0, 125.0);  // 10/s * 60 s, 5 sd
}

TEST_F(WorkloadTest, TimeScaleStretchesArrivalsOnly) {
  const Workload base = load_workload(write(with_seed(4), "base.toml"));
  const Workload slow = load_workload(write("time_scale = 2.5\n" + with_seed(4), "slow.toml"));
  ASSERT_EQ(base.requests.size(), slow.requests.size());
  for (size_t i = 0; i < base.requests.size(); ++i) {
    EXPECT_DOUBLE_EQ(slow.requests[i].arrival, base.requests[i].arrival * 2.5);
    EXPECT_EQ(slow.requests[i].prompt_tokens, base.requests[i].prompt_tokens);
    EXPECT_EQ(slow.requests[i].class_index, base.requests[i].class_index);
  }
}

TEST_F(WorkloadTest, TraceReplayArrivalsOrderAndClamp) {
  const Workload w = load_workload(kWorkloads / "trace_replay.toml");
  ASSERT_EQ(w.classes.size(), 1u);
  EXPECT_EQ(w.classes[0].name, "replay");
  EXPECT_FALSE(w.has_long_requests());
  ASSERT_EQ(w.requests.size(), 5u);
  // Seconds since the first row; the last row is on the next day (86400 - 65746.5 + 1.25).
  const double arrivals[] = {0.0, 0.5, 0.5, 1.75, 20654.75};
  const uint32_t prompts[] = {100, 200, 300, 400, 500};
  const uint32_t outputs[] = {10, 1, 30, 40, 50};  // the 0-token row is clamped to 1
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(w.requests[i].arrival, arrivals[i], 1e-9) << i;
    EXPECT_EQ(w.requests[i].prompt_tokens, prompts[i]) << i;  // equal times keep file order
    EXPECT_EQ(w.requests[i].output_tokens, outputs[i]) << i;
    EXPECT_EQ(w.requests[i].id, i);
  }
}

// A trace out of time order is replayed sorted, from its earliest timestamp, and says so: one early
// outlier shifts every arrival, which an operator must see before trusting the results.
TEST_F(WorkloadTest, ATraceOutOfTimeOrderIsReplayedSortedWithAWarning) {
  write(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "100,10,1\n"
      "101,20,2\n"
      "99.5,30,3\n"
      "102,40,4\n"
      "40,50,5\n",
      "unsorted.csv");
  const Workload w = load_workload(write("[trace]\nfile = \"unsorted.csv\"\n"));
  ASSERT_EQ(w.requests.size(), 5u);
  const double arrivals[] = {0.0, 59.5, 60.0, 61.0, 62.0};
  const uint32_t prompts[] = {50, 30, 10, 20, 40};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_DOUBLE_EQ(w.requests[i].arrival, arrivals[i]) << i;
    EXPECT_EQ(w.requests[i].prompt_tokens, prompts[i]) << i;
  }
  ASSERT_EQ(w.warnings.size(), 1u);
  const std::string& warning = w.warnings[0];
  EXPECT_NE(warning.find("unsorted.csv:4: the trace is not in time order: 2 row(s)"),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("by up to 62 s"), std::string::npos) << warning;
  // Carried by the workloads derived from it.
  EXPECT_EQ(w.without_long_classes().warnings, w.warnings);
  // Only the rows kept count: the first two are in order.
  EXPECT_TRUE(
      load_workload(write("[trace]\nfile = \"unsorted.csv\"\nlimit = 2\n")).warnings.empty());

  EXPECT_TRUE(load_workload(kWorkloads / "trace_replay.toml").warnings.empty());
}

TEST_F(WorkloadTest, TraceLimitAndTimeScales) {
  const Workload w =
      load_workload(write("time_scale = 2\n[trace]\nfile = " + fixture("small_trace.csv") +
                          "\nlimit = 4\ntime_scale = 0.5\n"));
  ASSERT_EQ(w.requests.size(), 4u);
  EXPECT_EQ(w.classes[0].name, "trace");
  // 0.5 * 2 = 1: arrivals unchanged.
  EXPECT_NEAR(w.requests[3].arrival, 1.75, 1e-9);
  const Workload fast = load_workload(
      write("[trace]\nfile = " + fixture("small_trace.csv") + "\ntime_scale = 0.5\n", "f.toml"));
  EXPECT_NEAR(fast.requests[3].arrival, 0.875, 1e-9);
  EXPECT_NEAR(fast.requests[4].arrival, 20654.75 / 2, 1e-9);
}

TEST_F(WorkloadTest, LongClassMixedIntoTrace) {
  const std::string text = "seed = 5\n[trace]\nfile = " + fixture("small_trace.csv") + R"(
[[classes]]
name = "long"
share = 0.5
prompt = { dist = "uniform", min = 16384, max = 65536 }
output = { dist = "trace", file = )" +
                           fixture("small_trace.csv") +
                           R"(, column = "GeneratedTokens" }
)";
  const Workload w = load_workload(write(text));
  ASSERT_EQ(w.classes.size(), 2u);
  EXPECT_EQ(w.classes[0].name, "trace");
  EXPECT_FALSE(w.classes[0].is_long);
  EXPECT_TRUE(w.classes[1].is_long);  // inferred: largest mean prompt
  // 5 trace rows are half of the total: 5 long requests.
  ASSERT_EQ(w.requests.size(), 10u);
  expect_sorted_with_ids(w);
  std::vector<uint32_t> trace_prompts;
  size_t longs = 0;
  for (const auto& r : w.requests) {
    EXPECT_GE(r.arrival, 0.0);
    EXPECT_LE(r.arrival, 20654.75);  // within the trace's span
    if (r.class_index == 1) {
      ++longs;
      EXPECT_GE(r.prompt_tokens, 16384u);
      EXPECT_LE(r.prompt_tokens, 65536u);
      EXPECT_TRUE(std::set<uint32_t>({10, 1, 30, 40, 50}).count(r.output_tokens));
    } else {
      trace_prompts.push_back(r.prompt_tokens);
    }
  }
  EXPECT_EQ(longs, 5u);
  EXPECT_EQ(trace_prompts, (std::vector<uint32_t>{100, 200, 300, 400, 500}));

  const Workload again = load_workload(write(text, "again.toml"));
  EXPECT_TRUE(same_requests(w, again));

  const Workload base = w.without_long_classes();
  EXPECT_FALSE(base.requests.empty());
  EXPECT_EQ(base.requests.size(), 5u);
  EXPECT_EQ(base.classes.size(), 2u);
  for (const auto& r : base.requests) {
    EXPECT_EQ(r.class_index, 0u);
    EXPECT_EQ(w.requests[r.id].arrival, r.arrival);  // ids and arrivals unchanged
    EXPECT_EQ(w.requests[r.id].prompt_tokens, r.prompt_tokens);
  }
}

TEST_F(WorkloadTest, LongClassInferenceAndExplicitFlags) {
  const Workload w = load_workload(kWorkloads / "generated.toml");
  ASSERT_EQ(w.classes.size(), 2u);
  EXPECT_FALSE(w.classes[0].is_long);
  EXPECT_TRUE(w.classes[1].is_long);
  EXPECT_TRUE(w.has_long_requests());
  for (const auto& r : w.requests) EXPECT_EQ(r.priority, r.class_index == 1 ? 2 : 0);
  // The first requests only, none of them long (--num-requests): no long requests, although the
  // class is there (the HOL and stall factors then have nothing to measure).
  const auto first_long = std::find_if(w.requests.begin(), w.requests.end(),
                                       [](const WorkloadRequest& r) { return r.class_index == 1; });
  ASSERT_NE(first_long, w.requests.begin());
  Workload short_only = w;
  short_only.requests.erase(short_only.requests.begin() + (first_long - w.requests.begin()),
                            short_only.requests.end());
  EXPECT_FALSE(short_only.has_long_requests());

  // An explicit `long = false` anywhere switches inference off.
  std::string text = with_seed(1);
  text.replace(text.find("name = \"a\""), 10, "name = \"a\"\nlong = false");
  EXPECT_FALSE(load_workload(write(text)).has_long_requests());
  // An explicit mark wins over the prompt lengths.
  text = with_seed(1);
  text.replace(text.find("name = \"a\""), 10, "name = \"a\"\nlong = true");
  const Workload marked = load_workload(write(text, "marked.toml"));
  EXPECT_TRUE(marked.classes[0].is_long);
  EXPECT_FALSE(marked.classes[1].is_long);
}

// A class's shared beginnings come before each request's own prompt tokens, and adding them
// changes no other draw of the workload.
TEST_F(WorkloadTest, ASharedPrefixPrecedesEachRequestsOwnTokensAndDrawsNothingElse) {
  const std::string body = R"(
seed = 5
count = 400
[arrival]
process = "poisson"
rate = 10
[[classes]]
name = "chat"
share = 3
prompt = { dist = "uniform", min = 10, max = 90 }
output = { dist = "fixed", value = 8 }
)";
  const std::string other = R"(
[[classes]]
name = "doc"
share = 1
prompt = { dist = "fixed", value = 1000 }
output = { dist = "fixed", value = 8 }
)";
  const Workload plain = parse_workload(body + other, "plain.toml");
  const Workload shared =
      parse_workload(body + "shared_prefix = { tokens = 512, count = 3 }\n" + other, "shared.toml");
  ASSERT_EQ(plain.requests.size(), shared.requests.size());
  EXPECT_FALSE(same_requests(plain, shared));
  EXPECT_EQ(shared.classes[0].shared_prefix_tokens, 512u);
  EXPECT_EQ(shared.classes[0].shared_prefixes, 3u);
  EXPECT_DOUBLE_EQ(shared.classes[0].mean_prompt_tokens, 50.0 + 512.0);
  std::vector<size_t> per_beginning(3, 0);
  for (size_t i = 0; i < plain.requests.size(); ++i) {
    const WorkloadRequest& a = plain.requests[i];
    const WorkloadRequest& b = shared.requests[i];
    ASSERT_EQ(a.class_index, b.class_index);
    ASSERT_EQ(a.arrival, b.arrival);
    ASSERT_EQ(a.output_tokens, b.output_tokens);
    if (b.class_index == 0) {
      ASSERT_EQ(b.prompt_tokens, a.prompt_tokens + 512);
      ASSERT_EQ(b.shared_prefix_tokens, 512u);
      ASSERT_LT(b.shared_prefix, 3u);
      ++per_beginning[b.shared_prefix];
    } else {
      ASSERT_EQ(b.prompt_tokens, a.prompt_tokens);
      ASSERT_EQ(b.shared_prefix_tokens, 0u);
    }
  }
  for (size_t count : per_beginning) EXPECT_GT(count, 50u);  // about 100 of ~300 chats each
  EXPECT_TRUE(same_requests(shared, parse_workload(body +
                                                       "shared_prefix = { tokens = 512, "
                                                       "count = 3 }\n" +
                                                       other,
                                                   "again.toml")));
  // One beginning unless count says otherwise.
  const Workload one =
      parse_workload(body + "shared_prefix = { tokens = 7 }\n" + other, "one.toml");
  EXPECT_EQ(one.classes[0].shared_prefixes, 1u);
  for (const WorkloadRequest& r : one.requests) EXPECT_EQ(r.shared_prefix, 0u);
}

// max_tokens: what a class's clients ask for. Each request's output (its answer's length) is drawn
// as without it and cut to it; the requests ask for max_tokens, those of a class without the key
// for their output exactly. The trace's rows take it from [trace].
TEST_F(WorkloadTest, MaxTokensIsWhatClientsAskForAndCutsLongerAnswers) {
  const std::string classes = R"(
seed = 3
count = 400
[arrival]
process = "poisson"
rate = 10
[[classes]]
name = "chat"
share = 1
prompt = { dist = "uniform", min = 5, max = 50 }
output = { dist = "uniform", min = 1, max = 60 }
MAX
[[classes]]
name = "plain"
share = 1
prompt = { dist = "fixed", value = 10 }
output = { dist = "fixed", value = 7 }
)";
  auto with = [&](const std::string& line) {
    std::string text = classes;
    text.replace(text.find("MAX"), 3, line);
    return load_workload(write(text));
  };
  const Workload plain = with("");
  const Workload asked = with("max_tokens = 30");
  EXPECT_EQ(asked.classes[0].max_tokens, 30u);
  EXPECT_EQ(asked.classes[1].max_tokens, 0u);
  ASSERT_EQ(asked.requests.size(), plain.requests.size());
  EXPECT_FALSE(same_requests(plain, asked));
  size_t cut = 0;
  for (size_t i = 0; i < asked.requests.size(); ++i) {
    const WorkloadRequest& a = asked.requests[i];
    const WorkloadRequest& p = plain.requests[i];
    EXPECT_EQ(a.arrival, p.arrival) << i;
    EXPECT_EQ(a.prompt_tokens, p.prompt_tokens) << i;
    if (a.class_index == 0) {
      EXPECT_EQ(a.output_tokens, std::min(p.output_tokens, 30u)) << i;
      EXPECT_EQ(a.max_tokens, 30u) << i;
      EXPECT_EQ(a.asked_tokens(), 30u) << i;
      cut += p.output_tokens > 30;
    } else {
      EXPECT_EQ(a.output_tokens, 7u) << i;
      EXPECT_EQ(a.max_tokens, 0u) << i;
      EXPECT_EQ(a.asked_tokens(), 7u) << i;
    }
  }
  EXPECT_GT(cut, 0u) << "no answer was longer than max_tokens";

  const std::string trace = "[trace]\nfile = " + fixture("small_trace.csv") + "\nmax_tokens = 35\n";
  const Workload replay = load_workload(write(trace));
  const uint32_t outputs[] = {10, 1, 30, 35, 35};  // 40 and 50 cut to 35
  ASSERT_EQ(replay.requests.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(replay.requests[i].output_tokens, outputs[i]) << i;
    EXPECT_EQ(replay.requests[i].asked_tokens(), 35u) << i;
  }

  for (const char* bad : {"max_tokens = 0", "max_tokens = 1073741825", "max_tokens = 'many'"}) {
    std::string text = classes;
    text.replace(text.find("MAX"), 3, bad);
    expect_error(text, {"workload.toml", "classes[0].max_tokens"});
  }
  expect_error("[trace]\nfile = " + fixture("small_trace.csv") + "\nmax_tokens = 0\n",
               {"trace.max_tokens", "[1, 1073741824]"});
}

// Each arrival of a conversation class is the first of `turns` requests, `gap` seconds apart; each
// turn's prompt is the previous one's, its answer and a new message; the shared beginning is the
// conversation's; every first turn keeps its arrival, class and lengths (ids are numbered anew,
// with the turns); duration keeps the turns before it, and time_scale stretches the gaps too.
TEST_F(WorkloadTest, AConversationsTurnsGrowByTheAnswerAndANewMessage) {
  const std::string body = R"(
seed = 9
count = 100
duration = 40
[arrival]
process = "poisson"
rate = 2
[[classes]]
name = "chat"
share = 1
max_tokens = 50
prompt = { dist = "uniform", min = 10, max = 90 }
output = { dist = "uniform", min = 20, max = 80 }
shared_prefix = { tokens = 64, count = 5 }
)";
  const std::string other = R"(
[[classes]]
name = "single"
share = 1
prompt = { dist = "uniform", min = 100, max = 900 }
output = { dist = "fixed", value = 8 }
)";
  const Workload plain = parse_workload(body + other, "plain.toml");
  const Workload talks =
      parse_workload(body + "conversation = { turns = 4, gap = 3.5 }\n" + other, "talks.toml");
  EXPECT_EQ(talks.classes[0].turns, 4u);
  EXPECT_DOUBLE_EQ(talks.classes[0].turn_gap, 3.5);
  EXPECT_DOUBLE_EQ(talks.classes[0].mean_prompt_tokens, 50.0 * 5 / 2 + 50.0 * 3 / 2 + 64);
  // The first turns are the plain workload's requests, in the same order, with the same draws.
  std::vector<const WorkloadRequest*> firsts;
  std::map<uint64_t, std::vector<const WorkloadRequest*>> by_conversation;
  for (size_t i = 0; i < talks.requests.size(); ++i) {
    const WorkloadRequest& r = talks.requests[i];
    ASSERT_EQ(r.id, i);
    if (r.turn == 0) firsts.push_back(&r);
    if (r.class_index == 0) by_conversation[r.conversation_id()].push_back(&r);
    ASSERT_LT(r.arrival, 40.0);
  }
  ASSERT_EQ(firsts.size(), plain.requests.size());
  for (size_t i = 0; i < firsts.size(); ++i) {
    ASSERT_EQ(firsts[i]->class_index, plain.requests[i].class_index);
    ASSERT_EQ(firsts[i]->arrival, plain.requests[i].arrival);
    ASSERT_EQ(firsts[i]->prompt_tokens, plain.requests[i].prompt_tokens);
    ASSERT_EQ(firsts[i]->output_tokens, plain.requests[i].output_tokens);
  }
  size_t later_turns = 0, cut_short = 0;
  for (const auto& [conversation, turns] : by_conversation) {
    const WorkloadRequest& first = *turns.front();
    ASSERT_EQ(first.id, conversation);
    ASSERT_EQ(first.turn, 0u);
    // Turns before the duration's end only: four unless the conversation started late.
    const size_t expected =
        std::min<size_t>(4, static_cast<size_t>(std::ceil((40.0 - first.arrival) / 3.5)));
    ASSERT_EQ(turns.size(), expected) << "conversation " << conversation;
    cut_short += expected < 4;
    for (size_t k = 1; k < turns.size(); ++k) {
      const WorkloadRequest& prev = *turns[k - 1];
      const WorkloadRequest& r = *turns[k];
      ++later_turns;
      ASSERT_EQ(r.turn, k);
      ASSERT_DOUBLE_EQ(r.arrival, first.arrival + 3.5 * static_cast<double>(k));
      ASSERT_EQ(r.shared_prefix, first.shared_prefix);
      ASSERT_EQ(r.shared_prefix_tokens, 64u);
      // The previous prompt, its answer (at most max_tokens = 50) and 10-90 new tokens.
      const uint32_t answer = std::min(prev.output_tokens, 50u);
      ASSERT_GE(r.prompt_tokens, prev.prompt_tokens + answer + 10);
      ASSERT_LE(r.prompt_tokens, prev.prompt_tokens + answer + 90);
      ASSERT_LE(r.output_tokens, 50u);
      ASSERT_EQ(r.max_tokens, 50u);
    }
  }
  EXPECT_GT(later_turns, 60u);
  EXPECT_GT(cut_short, 0u);
  // A request of the other class stands alone.
  for (const WorkloadRequest& r : talks.requests) {
    if (r.class_index == 1) ASSERT_EQ(r.conversation_id(), r.id);
  }
  // The same file gives the same conversations, and a turn of another conversation is another
  // request.
  EXPECT_TRUE(same_requests(
      talks, parse_workload(body + "conversation = { turns = 4, gap = 3.5 }\n" + other, "t.toml")));
  Workload moved = talks;
  for (WorkloadRequest& r : moved.requests) {
    if (r.turn > 0) {
      r.first_turn += 1;
      break;
    }
  }
  EXPECT_FALSE(same_requests(talks, moved));
  // time_scale = 2 doubles every arrival, the gaps between turns included.
  const Workload slower = parse_workload(
      "time_scale = 2\n" + body + "conversation = { turns = 4, gap = 3.5 }\n" + other, "s.toml");
  ASSERT_EQ(slower.requests.size(), talks.requests.size());
  for (size_t i = 0; i < talks.requests.size(); ++i) {
    ASSERT_DOUBLE_EQ(slower.requests[i].arrival, 2 * talks.requests[i].arrival);
    ASSERT_EQ(slower.requests[i].turn, talks.requests[i].turn);
  }
}

TEST_F(WorkloadTest, ErrorBadConversation) {
  const std::string head = kOneFixedClass;
  expect_error(head + "conversation = { turns = 1, gap = 2 }\n",
               {"workload.toml", "classes[0].conversation.turns", "[2, 1000]"});
  expect_error(head + "conversation = { turns = 1001, gap = 2 }\n",
               {"classes[0].conversation.turns", "[2, 1000]"});
  expect_error(head + "conversation = { gap = 2 }\n", {"classes[0].conversation.turns", "missing"});
  expect_error(head + "conversation = { turns = 3 }\n", {"classes[0].conversation.gap", "missing"});
  expect_error(head + "conversation = { turns = 3, gap = 0 }\n",
               {"classes[0].conversation.gap", "must be > 0"});
  expect_error(head + "conversation = { turns = 3, gap = 1, think = 2 }\n",
               {"classes[0].conversation", "think", "unknown key"});
  expect_error(head + "conversation = 3\n", {"classes[0].conversation", "expected a table"});
  expect_error(head + "conversation = { turns = 3, gap = 1, wait_for_answer = \"yes\" }\n",
               {"classes[0].conversation.wait_for_answer", "expected true or false"});
  // Prompts that would outgrow any context.
  std::string huge = head;
  huge.replace(huge.find("value = 10"), 10, "value = 600000000");
  expect_error(huge + "conversation = { turns = 3, gap = 1 }\n",
               {"classes[0].conversation", "turn 2", "at most 1073741824"});
  // Turns past what a simulation can time.
  expect_error(head + "conversation = { turns = 3, gap = 6e8 }\n",
               {"classes[0].conversation.gap", "turn 3", "beyond the 1e9 s"});
  // Not among a trace's mixed-in classes.
  expect_error("[trace]\nfile = " + fixture("small_trace.csv") +
                   "\n[[classes]]\nname = \"c\"\nshare = 0.1\nprompt = { dist = \"fixed\", value "
                   "= 10 }\noutput = { dist = \"fixed\", value = 2 }\nconversation = { turns = 2, "
                   "gap = 1 }\n",
               {"classes[0].conversation", "not allowed with [trace]"});
}

TEST_F(WorkloadTest, ErrorBadSharedPrefix) {
  const std::string head = kOneFixedClass;
  expect_error(head + "shared_prefix = { tokens = 0 }\n",
               {"workload.toml", "classes[0].shared_prefix.tokens", "[1, 1073741824]"});
  expect_error(head + "shared_prefix = { tokens = 5, count = 0 }\n",
               {"classes[0].shared_prefix.count", "[1, 65536]"});
  expect_error(head + "shared_prefix = { tokens = 5, cuont = 2 }\n",
               {"classes[0].shared_prefix", "cuont", "unknown key"});
  expect_error(head + "shared_prefix = 5\n", {"classes[0].shared_prefix", "expected a table"});
  expect_error(head + "shared_prefix = { count = 2 }\n",
               {"classes[0].shared_prefix.tokens", "missing"});
  expect_error(head + "shared_prefix = { tokens = 1073741820 }\n",
               {"classes[0].shared_prefix.tokens", "prompts of up to 10 tokens",
                "exceed 1073741824 tokens"});
}

TEST_F(WorkloadTest, ErrorUnknownDistribution) {
  expect_error(R"(
count = 10
[arrival]
process = "poisson"
rate = 1
[[classes]]
name = "a"
share = 1
prompt = { dist = "fixed", value = 4 }
output = { dist = "fixed", value = 4 }
[[classes]]
name = "b"
share = 1
prompt = { dist = "gauss", mean = 4 }
output = { dist = "fixed", value = 4 }
)",
               {"workload.toml", "classes[1].prompt.dist",
                "unknown distribution \"gauss\" (allowed: fixed, uniform, lognormal, trace)"});
}

// Each names the key by its path and its line in the file, as deployment files' errors do.
TEST_F(WorkloadTest, ErrorUnknownKeys) {
  std::string text = with_seed(1);
  expect_error("cuont = 3\n" + text, {"workload.toml", "cuont (line 1)", "unknown key", "count"});
  text.replace(text.find("share = 3"), 9, "shares = 3");
  const auto line = std::count(text.begin(), text.begin() + text.find("shares = 3"), '\n') + 1;
  expect_error(text, {"workload.toml", "classes[0].shares (line " + std::to_string(line) + ")",
                      "unknown key", "share"});
  text = with_seed(1);
  text.replace(text.find("max = 8 }"), 9, "max = 8, mean = 3 }");
  expect_error(text, {"classes[0].prompt.mean", "unknown key", "dist, min, max"});
}

TEST_F(WorkloadTest, ErrorMissingShare) {
  std::string text = with_seed(1);
  text.replace(text.find("share = 1"), 9, "");
  expect_error(text, {"workload.toml", "classes[1].share", "missing", "> 0"});
}

// From helper-201's review: two shares of 1e308 add up to infinity, and every draw fell to the
// last class (a 50/50 workload became 0/100 without a word). An infinite share was taken too.
TEST_F(WorkloadTest, ErrorSharesPastADouble) {
  std::string text = with_seed(1);
  text.replace(text.find("share = 1"), 9, "share = 1e308");  // the second class's
  text.replace(text.find("share = 3"), 9, "share = 1e308");
  expect_error(text, {"workload.toml", "classes", "the shares add up to more than a double holds"});
  text = with_seed(1);
  text.replace(text.find("share = 3"), 9, "share = inf");
  expect_error(text, {"workload.toml", "classes[0].share", "must be a finite number"});
}

TEST_F(WorkloadTest, ErrorNegativeRate) {
  std::string text = with_seed(1);
  text.replace(text.find("rate = 10"), 9, "rate = -2.5");
  expect_error(text, {"workload.toml", "arrival.rate", "must be > 0", "-2.5"});
}

TEST_F(WorkloadTest, ErrorBadValues) {
  std::string text = with_seed(1);
  text.replace(text.find("min = 5, max = 8"), 16, "min = 9, max = 8");
  expect_error(text, {"classes[0].prompt.max", ">= min"});
  text = with_seed(1);
  text.replace(text.find("value = 7"), 9, "value = 0");
  expect_error(text, {"classes[0].output.value", "[1, "});
  text = with_seed(1);
  text.replace(text.find("rate = 10"), 9, "rate = \"fast\"");
  expect_error(text, {"arrival.rate", "expected a number, got a string"});
  text = with_seed(1);
  text.replace(text.find("\"poisson\""), 9, "\"bursty\"");
  expect_error(text, {"arrival.process", "\"bursty\"", "poisson, fixed"});
  text = with_seed(1);
  text.replace(text.find("count = 20000"), 13, "");
  expect_error(text, {"count", "duration"});
  expect_error(R"(
duration = 0.5
[arrival]
process = "fixed"
times = [1, 2]
[[classes]]
name = "x"
share = 1
prompt = { dist = "fixed", value = 4 }
output = { dist = "fixed", value = 4 }
)",
               {"workload.toml", "no requests"});
  expect_error("[trace]\nfile = " + fixture("small_trace.csv") + R"(
[[classes]]
name = "x"
share = 1.0
prompt = { dist = "fixed", value = 4 }
output = { dist = "fixed", value = 4 }
)",
               {"classes", "sum to < 1"});
}

TEST_F(WorkloadTest, ErrorTomlSyntaxHasLineAndColumn) {
  expect_error("seed = 1\ncount = = 3\n", {"workload.toml:2:", "invalid TOML"});
}

TEST_F(WorkloadTest, ErrorMissingFiles) {
  try {
    load_workload(dir_ / "nope.toml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.toml"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), HW_NOT_FOUND);
  }
  expect_error("[trace]\nfile = \"missing.csv\"\n",
               {"workload.toml", "trace.file", "missing.csv", "no such file"});
  // A directory exists: "no such file" would send the operator looking in the wrong place.
  fs::create_directories(dir_ / "traces");
  expect_error("[trace]\nfile = \"traces\"\n", {"trace.file", "a directory, not a file"});
  try {
    load_workload(dir_ / "traces");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a directory, not a file"), std::string::npos) << e.what();
  }
}

// Spreadsheets save CSV with a UTF-8 byte order mark before the first column's name.
TEST_F(WorkloadTest, ATraceWithAByteOrderMarkLoads) {
  write("\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\n0,10,1\n1,20,2\n", "bom.csv");
  const Workload w = load_workload(write("[trace]\nfile = \"bom.csv\"\n"));
  ASSERT_EQ(w.requests.size(), 2u);
  EXPECT_EQ(w.requests[1].prompt_tokens, 20u);
}

TEST_F(WorkloadTest, ErrorBadTraceRowNamesFileAndLine) {
  try {
    load_workload(kWorkloads / "bad_trace.toml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad_trace.toml"), std::string::npos) << msg;
    EXPECT_NE(msg.find("trace.file"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad_trace.csv:4:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ContextTokens \"abc\""), std::string::npos) << msg;
  }
  write("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\nyesterday,3,4\n",
        "t.csv");
  expect_error("[trace]\nfile = \"t.csv\"\n", {"t.csv:3:", "bad TIMESTAMP \"yesterday\""});
  write("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1\n", "short.csv");
  expect_error("[trace]\nfile = \"short.csv\"\n", {"short.csv:2:", "expected 3 fields, got 2"});
  // Seconds beyond int64 are not a timestamp (converting them was undefined behaviour).
  write("TIMESTAMP,ContextTokens,GeneratedTokens\n0,2,3\n1e20,2,3\n", "far.csv");
  expect_error("[trace]\nfile = \"far.csv\"\n", {"far.csv:3:", "bad TIMESTAMP \"1e20\""});
  // A day the month does not have is no date (it was read as a day of the next month).
  write(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-28 10:00:00,2,3\n2023-02-30 10:00:00,2,3\n",
      "feb30.csv");
  expect_error("[trace]\nfile = \"feb30.csv\"\n",
               {"feb30.csv:3:", "bad TIMESTAMP \"2023-02-30 10:00:00\""});
  write("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-04-31 00:00:00,2,3\n", "apr31.csv");
  expect_error("[trace]\nfile = \"apr31.csv\"\n", {"apr31.csv:2:", "bad TIMESTAMP"});
  // February 29th of a leap year is a date (and 1900 was not one, 2000 was).
  for (const char* leap_day : {"2024-02-29", "2000-02-29"}) {
    write("TIMESTAMP,ContextTokens,GeneratedTokens\n" + std::string(leap_day) + " 10:00:00,2,3\n",
          "leap.csv");
    EXPECT_EQ(load_workload(write("[trace]\nfile = \"leap.csv\"\n")).requests.size(), 1u)
        << leap_day;
  }
  write("TIMESTAMP,ContextTokens,GeneratedTokens\n1900-02-29 10:00:00,2,3\n", "no_leap.csv");
  expect_error("[trace]\nfile = \"no_leap.csv\"\n", {"no_leap.csv:2:", "bad TIMESTAMP"});
}

// Arrivals spread over more than 1e9 s would lose step times to rounding (or overflow to inf and
// stall the simulation, blamed on the deployment): refused, naming what stretched them.
TEST_F(WorkloadTest, ErrorArrivalsSpanningBeyondWhatCanBeTimed) {
  std::string text = with_seed(1);
  text.replace(text.find("rate = 10"), 9, "rate = 1e-300");
  expect_error(text,
               {"workload.toml", "arrival (line 4):", "the arrivals span", "beyond the 1e9 s"});
  text = with_seed(1);
  text = "time_scale = 1e308\n" + text;
  expect_error(text, {"time_scale (line 1):", "the arrivals span inf s"});
  write("TIMESTAMP,ContextTokens,GeneratedTokens\n0,2,3\n1e17,2,3\n", "span.csv");
  expect_error("[trace]\nfile = \"span.csv\"\n", {"trace (line 1):", "the arrivals span 1e+17 s"});
}

TEST_F(WorkloadTest, ParseFromTextMatchesLoadFromFile) {
  const std::string text = with_seed(21);
  const Workload from_file = load_workload(write(text));
  const Workload from_text = parse_workload(text, "<built-in workload>");
  EXPECT_EQ(from_text.source, "<built-in workload>");
  EXPECT_TRUE(same_requests(from_file, from_text));
  try {
    parse_workload("count = [", "<built-in workload>");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("<built-in workload>:1:"), std::string::npos) << e.what();
  }
}

TEST_F(WorkloadTest, ExampleConfigsLoad) {
  // The CPU head-of-line workload: 60 requests, the documents marked long and 4k-8k tokens.
  const Workload cpu = load_workload(kConfigs / "cpu_hol_mixed.toml");
  ASSERT_EQ(cpu.requests.size(), 60u);
  ASSERT_TRUE(cpu.has_long_requests());
  for (const auto& r : cpu.requests) {
    if (cpu.classes[r.class_index].is_long) {
      EXPECT_GE(r.prompt_tokens, 4000u);
      EXPECT_LE(r.prompt_tokens, 8000u);
    }
  }
  const Workload mixed = load_workload(kConfigs / "mixed_short_long.toml");
  ASSERT_EQ(mixed.requests.size(), 500u);
  ASSERT_TRUE(mixed.has_long_requests());
  size_t longs = 0;
  for (const auto& r : mixed.requests) {
    if (mixed.classes[r.class_index].is_long) {
      ++longs;
      EXPECT_GE(r.prompt_tokens, 16384u);
      EXPECT_LE(r.prompt_tokens, 65536u);
    }
  }
  EXPECT_GT(longs, 3u);
  EXPECT_LT(longs, 35u);

  const fs::path azure = kConfigs / "azure_conv.toml";
  if (!fs::exists(kConfigs / "../../../shared/traces/azure_llm_2023_conv.csv")) {
    GTEST_SKIP() << "the shared Azure trace is not present";
  }
  const auto start = std::chrono::steady_clock::now();
  const Workload conv = load_workload(azure);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  size_t trace_rows = 0;
  for (const auto& r : conv.requests) trace_rows += r.class_index == 0;
  EXPECT_EQ(trace_rows, 19366u);
  EXPECT_EQ(conv.requests.size(), 19366u + static_cast<size_t>(std::llround(0.03 * 19366 / 0.97)));
  expect_sorted_with_ids(conv);
  EXPECT_LT(ms, 1000.0);  // ~15 ms optimised; loose so sanitizer/debug builds pass
}

}  // namespace
}  // namespace headway::core
