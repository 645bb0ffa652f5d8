#include "headway/core/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "headway/core/error.h"
#include "headway/core/percentiles.h"

namespace headway::core {
namespace {

constexpr double kEps = 1e-9;

TEST(Percentiles, LinearInterpolationOnHandWorkedVectors) {
  const std::vector<double> v = {4, 1, 3, 2};  // sorted: 1 2 3 4
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);   // h = 1.5
  EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);  // h = 0.75
  EXPECT_NEAR(percentile(v, 90), 3.7, kEps);  // h = 2.7
  EXPECT_NEAR(percentile(v, 99), 3.97, kEps);

  const std::vector<double> ten = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  EXPECT_NEAR(percentile_sorted(ten, 90), 91.0, kEps);  // h = 8.1
  EXPECT_NEAR(percentile_sorted(ten, 50), 55.0, kEps);

  EXPECT_DOUBLE_EQ(percentile({7.5}, 99), 7.5);
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_THROW(percentile(v, 101), Error);
  EXPECT_THROW(percentile(v, -1), Error);
}

TEST(Percentiles, SummarizeDropsNaNs) {
  const LatencySummary s = summarize({3, std::nan(""), 1, 2});
  EXPECT_EQ(s.count, 3u);
  EXPECT_DOUBLE_EQ(s.p50, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 3.0);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  const LatencySummary empty = summarize({});
  EXPECT_TRUE(std::isnan(empty.min));
  EXPECT_EQ(empty.count, 0u);
  EXPECT_TRUE(std::isnan(empty.p50));
  EXPECT_TRUE(std::isnan(empty.p99));
  EXPECT_TRUE(std::isnan(empty.mean));
}

RequestRecord record(uint64_t id, uint32_t cls, double arrival, double scheduled,
                     std::vector<double> tokens, bool finished = true) {
  RequestRecord r;
  r.id = id;
  r.class_index = cls;
  r.arrival = arrival;
  r.scheduled = scheduled;
  r.first_token = tokens.front();
  r.output_tokens = static_cast<uint32_t>(tokens.size());
  r.finished = finished;
  if (finished) r.finish = tokens.back();
  r.token_times = std::move(tokens);
  return r;
}

// Class 0 "short", class 1 "long"; four requests in the workload (three short, one long).
Workload hand_workload() {
  Workload w;
  w.source = "hand.toml";
  w.classes = {{"short", false}, {"long", true}};
  w.requests = {
      {0, 0, 0.0, 100, 3}, {1, 1, 0.5, 30000, 1}, {2, 0, 1.0, 100, 2}, {3, 0, 2.0, 100, 2}};
  return w;
}

std::vector<RequestRecord> hand_records() {
  std::vector<RequestRecord> rs;
  // TTFT 1.0, ITL 0.2 0.3, TPOT (1.5 - 1.0) / 2 = 0.25, E2E 1.5, queue 0.5.
  rs.push_back(record(0, 0, 0.0, 0.5, {1.0, 1.2, 1.5}));
  // Long: TTFT 4.0, no ITL, no TPOT (1 token), E2E 4.0, queue 0; 2 preemptions.
  rs.push_back(record(1, 1, 0.5, 0.5, {4.5}));
  rs.back().preemptions = 2;
  // TTFT 2.0, ITL 0.1, TPOT 0.1, E2E 2.1, queue 0.
  rs.push_back(record(2, 0, 1.0, 1.0, {3.0, 3.1}));
  // Unfinished: counted, excluded from latencies and from throughput (as vLLM's benchmark leaves
  // failed requests' tokens out); its last token (6.0) still ends the span.
  rs.push_back(record(3, 0, 2.0, 2.5, {5.0, 6.0}, false));
  return rs;
}

std::vector<RequestRecord> baseline_records() {
  // Short requests alone: TTFT 0.5 and 1.0; ITL 0.1 0.1 0.05.
  return {record(0, 0, 0.0, 0.0, {0.5, 0.6, 0.7}), record(2, 0, 1.0, 1.0, {2.0, 2.05})};
}

TEST(Report, HandWorkedLatencies) {
  const Workload w = hand_workload();
  const auto records = hand_records();
  const Report r = build_report(w, records, 42, 6.5, 0.25);
  EXPECT_EQ(r.steps, 42u);
  EXPECT_DOUBLE_EQ(r.simulated_seconds, 6.5);
  EXPECT_DOUBLE_EQ(r.wall_seconds, 0.25);
  EXPECT_DOUBLE_EQ(r.span_seconds, 6.0);  // first arrival 0 .. last token 6.0
  EXPECT_EQ(r.preemptions, 2u);
  ASSERT_EQ(r.classes.size(), 2u);

  const ClassReport& s = r.classes[0];
  EXPECT_EQ(s.name, "short");
  EXPECT_FALSE(s.is_long);
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.finished, 2u);
  EXPECT_EQ(s.ttft.count, 2u);
  EXPECT_NEAR(s.ttft.p50, 1.5, kEps);
  EXPECT_NEAR(s.ttft.p90, 1.9, kEps);
  EXPECT_NEAR(s.ttft.p99, 1.99, kEps);
  EXPECT_NEAR(s.ttft.max, 2.0, kEps);
  EXPECT_NEAR(s.ttft.mean, 1.5, kEps);
  EXPECT_EQ(s.itl.count, 3u);  // {0.1, 0.2, 0.3}
  EXPECT_NEAR(s.itl.p50, 0.2, kEps);
  EXPECT_NEAR(s.itl.p90, 0.28, kEps);
  EXPECT_NEAR(s.itl.p99, 0.298, kEps);
  EXPECT_NEAR(s.itl.max, 0.3, kEps);
  EXPECT_EQ(s.tpot.count, 2u);  // {0.1, 0.25}
  EXPECT_NEAR(s.tpot.mean, 0.175, kEps);
  EXPECT_NEAR(s.tpot.max, 0.25, kEps);
  EXPECT_NEAR(s.e2e.p50, 1.8, kEps);  // {1.5, 2.1}
  EXPECT_NEAR(s.queue.max, 0.5, kEps);
  EXPECT_NEAR(s.queue.p50, 0.25, kEps);
  EXPECT_EQ(s.output_tokens, 5u);  // 3 + 2: not the unfinished request's 2
  EXPECT_NEAR(s.output_tokens_per_s, 5.0 / 6.0, kEps);
  EXPECT_NEAR(s.requests_per_s, 2.0 / 6.0, kEps);

  const ClassReport& l = r.classes[1];
  EXPECT_TRUE(l.is_long);
  EXPECT_EQ(l.requests, 1u);
  EXPECT_EQ(l.finished, 1u);
  EXPECT_NEAR(l.ttft.p99, 4.0, kEps);
  EXPECT_EQ(l.itl.count, 0u);
  EXPECT_TRUE(std::isnan(l.itl.p50));
  EXPECT_EQ(l.tpot.count, 0u);
  EXPECT_NEAR(l.e2e.max, 4.0, kEps);

  const ClassReport& o = r.overall;
  EXPECT_EQ(o.name, "overall");
  EXPECT_EQ(o.requests, 4u);
  EXPECT_EQ(o.finished, 3u);
  EXPECT_NEAR(o.ttft.p50, 2.0, kEps);  // {1, 2, 4}
  EXPECT_NEAR(o.ttft.p90, 3.6, kEps);
  EXPECT_NEAR(o.ttft.mean, 7.0 / 3.0, kEps);
  EXPECT_NEAR(o.output_tokens_per_s, 6.0 / 6.0, kEps);
  EXPECT_NEAR(o.requests_per_s, 0.5, kEps);

  EXPECT_FALSE(r.hol_factor);  // no baseline
  EXPECT_FALSE(r.stall_factor);
  EXPECT_FALSE(r.short_p99_ttft_without_long);
}

// The share of prompt tokens found cached counts served prompts only: a refused request (no first
// token) was never looked up, and its long prompt made the share look small.
TEST(Report, CachedPromptTokensCountServedPromptsOnly) {
  const Workload w = hand_workload();
  std::vector<RequestRecord> records = hand_records();
  for (RequestRecord& r : records) {
    r.prompt_tokens = 100;
    r.cached_tokens = 50;
  }
  RequestRecord refused;
  refused.id = 1;
  refused.class_index = 1;
  refused.arrival = 0.5;
  refused.prompt_tokens = 30000;
  records[1] = refused;
  const Report r = build_report(w, records, 1, 6, 1);
  EXPECT_EQ(r.prompt_tokens, 300u);
  EXPECT_EQ(r.cached_prompt_tokens, 150u);
}

// A workload's conversations are reported by turn: turns 1 to 8 alone, then 9-16 (named by the
// turns present), with each group's requests, TTFT and cached share; a class of standalone
// requests stays out, and records that are not the workload's requests in order give no groups.
TEST(Report, ConversationsAreReportedByTurn) {
  Workload w = parse_workload(R"(
seed = 1
[arrival]
process = "fixed"
times = [0, 0]
[[classes]]
name = "chat"
share = 1
prompt = { dist = "fixed", value = 10 }
output = { dist = "fixed", value = 2 }
conversation = { turns = 10, gap = 1.0 }
[[classes]]
name = "alone"
share = 0.000001
prompt = { dist = "fixed", value = 10 }
output = { dist = "fixed", value = 2 }
)",
                              "talks.toml");
  ASSERT_EQ(w.requests.size(), 20u);
  // A standalone request last (the draw by share gave the class none).
  w.requests.push_back(WorkloadRequest{20, 1, 100.0, 10, 2, 0});
  std::vector<RequestRecord> records(w.requests.size());
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const WorkloadRequest& q = w.requests[i];
    RequestRecord& r = records[i];
    r.id = q.id;
    r.class_index = q.class_index;
    r.arrival = q.arrival;
    r.first_token = q.arrival + 0.01 * (q.turn + 1);  // TTFT 10 ms × the turn
    r.finish = r.first_token;
    r.finished = true;
    r.prompt_tokens = 100;
    r.cached_tokens = q.turn == 0 ? 0 : 80;
  }
  const Report report = build_report(w, records, 1, 120, 1);
  ASSERT_EQ(report.turns.size(), 9u);
  for (uint32_t t = 0; t < 8; ++t) {
    const TurnGroup& g = report.turns[t];
    EXPECT_EQ(g.first_turn, t + 1);
    EXPECT_EQ(g.last_turn, t + 1);
    EXPECT_EQ(g.requests, 2u);
    EXPECT_EQ(g.finished, 2u);
    EXPECT_NEAR(g.ttft.p50, 0.01 * (t + 1), 1e-9);
    EXPECT_EQ(g.prompt_tokens, 200u);
    EXPECT_EQ(g.cached_prompt_tokens, t == 0 ? 0u : 160u);
  }
  EXPECT_EQ(report.turns[8].first_turn, 9u);
  EXPECT_EQ(report.turns[8].last_turn, 10u);
  EXPECT_EQ(report.turns[8].requests, 4u);
  EXPECT_EQ(report.classes[1].requests, 1u);  // counted in its class, in no turn
  std::ostringstream text;
  print_report(text, report);
  EXPECT_NE(text.str().find("9-10"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("80.0%"), std::string::npos) << text.str();
  const nlohmann::json json = report_to_json(report);
  ASSERT_EQ(json["turns"].size(), 9u);
  EXPECT_EQ(json["turns"][8]["last_turn"], 10);
  EXPECT_EQ(json["turns"][1]["cached_prompt_tokens"], 160);

  // Records in another order cannot be matched to turns.
  std::vector<RequestRecord> shuffled = records;
  std::swap(shuffled[0], shuffled[1]);
  EXPECT_TRUE(build_report(w, shuffled, 1, 120, 1).turns.empty());
}

TEST(Report, HolAndStallFactorsFromBaseline) {
  const Workload w = hand_workload();
  const auto records = hand_records();
  const auto baseline = baseline_records();
  const Report r = build_report(w, records, 1, 6, 1, &baseline);
  // With long: short p99 TTFT 1.99, p99 ITL 0.298. Without: TTFT {0.5, 1.0} -> 0.995;
  // ITL {0.05, 0.1, 0.1} -> 0.1.
  ASSERT_TRUE(r.short_p99_ttft_without_long);
  EXPECT_NEAR(*r.short_p99_ttft_without_long, 0.995, kEps);
  ASSERT_TRUE(r.hol_factor);
  EXPECT_NEAR(*r.hol_factor, 2.0, kEps);
  ASSERT_TRUE(r.stall_factor);
  EXPECT_NEAR(*r.stall_factor, 2.98, kEps);

  // Without a long class there is nothing to remove: no factors.
  Workload plain = w;
  plain.classes[1].is_long = false;
  EXPECT_FALSE(build_report(plain, records, 1, 6, 1, &baseline).hol_factor);
}

TEST(Report, FactorsWithoutAnyFinishedLongRequestSaySo) {
  const auto baseline = baseline_records();
  std::ostringstream with_long;
  print_report(with_long, build_report(hand_workload(), hand_records(), 1, 6, 1, &baseline));
  EXPECT_EQ(with_long.str().find("no long request finished"), std::string::npos) << with_long.str();

  // The long request was refused: it never ran beside the short ones.
  auto records = hand_records();
  records[1] = RequestRecord{};
  records[1].id = 1;
  records[1].class_index = 1;
  records[1].arrival = 0.5;
  const Report r = build_report(hand_workload(), records, 1, 6, 1, &baseline);
  ASSERT_TRUE(r.hol_factor);
  std::ostringstream out;
  print_report(out, r);
  EXPECT_NE(out.str().find("no long request finished"), std::string::npos) << out.str();
}

// The hand workload has two short requests: their p99 is about the slower one, and the report
// says the factors are noisy. A run of 100 short requests has no such note.
TEST(Report, FactorsOfFewShortRequestsSayTheyAreNoisy) {
  const auto baseline = baseline_records();
  std::ostringstream few;
  print_report(few, build_report(hand_workload(), hand_records(), 1, 6, 1, &baseline));
  EXPECT_NE(few.str().find("the p99s rest on 2 short requests"), std::string::npos) << few.str();

  Report many = build_report(hand_workload(), hand_records(), 1, 6, 1, &baseline);
  ASSERT_TRUE(many.hol_factor);
  EXPECT_EQ(many.factor_samples, 2u);  // both runs have two
  many.factor_samples = 100;
  std::ostringstream enough;
  print_report(enough, many);
  EXPECT_EQ(enough.str().find("the p99s rest on"), std::string::npos) << enough.str();
}

TEST(Report, RejectsRecordOfUnknownClass) {
  auto records = hand_records();
  records[2].class_index = 7;
  try {
    build_report(hand_workload(), records, 0, 0, 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("class_index 7"), std::string::npos) << e.what();
  }
}

TEST(Report, EmptyRunHasNaNsNotGarbage) {
  const Report r = build_report(hand_workload(), {}, 0, 0, 0);
  EXPECT_EQ(r.overall.requests, 4u);
  EXPECT_EQ(r.overall.finished, 0u);
  EXPECT_EQ(r.overall.ttft.count, 0u);
  EXPECT_TRUE(std::isnan(r.overall.ttft.p99));
  EXPECT_EQ(r.overall.output_tokens_per_s, 0.0);
  std::ostringstream out;
  print_report(out, r);  // must not throw
  EXPECT_TRUE(report_to_json(r)["overall"]["ttft"]["p99"].is_null());
}

TEST(Report, PrintAndJson) {
  const auto records = hand_records();
  const auto baseline = baseline_records();
  const Report r = build_report(hand_workload(), records, 42, 6, 0.5, &baseline);
  std::ostringstream out;
  print_report(out, r);
  const std::string text = out.str();
  for (const char* part : {"short", "long", "overall", "TTFT", "ITL", "TPOT", "E2E", "p99", "1.99s",
                           "298.0ms", "HOL factor", "2.00", "stall factor", "2.98", "995.0ms",
                           "42 steps", "2 preemptions", "12.0x real time"}) {
    EXPECT_NE(text.find(part), std::string::npos) << "missing \"" << part << "\" in\n" << text;
  }

  const nlohmann::json j = report_to_json(r);
  ASSERT_EQ(j["classes"].size(), 2u);
  EXPECT_EQ(j["classes"][0]["name"], "short");
  EXPECT_EQ(j["classes"][1]["is_long"], true);
  EXPECT_NEAR(j["classes"][0]["ttft"]["p50"].get<double>(), 1.5, kEps);
  EXPECT_TRUE(j["classes"][1]["itl"]["p50"].is_null());
  EXPECT_EQ(j["overall"]["finished"], 3);
  EXPECT_NEAR(j["hol_factor"].get<double>(), 2.0, kEps);
  EXPECT_NEAR(j["stall_factor"].get<double>(), 2.98, kEps);
  EXPECT_EQ(j["steps"], 42);
  EXPECT_EQ(j["preemptions"], 2);
  EXPECT_EQ(j["time_unit"], "s");
}

TEST(Report, ShortAndLongGroupsPoolTheClasses) {
  const Report r = build_report(hand_workload(), hand_records(), 1, 6, 1);
  // One short and one long class: the groups equal them, under fixed names.
  EXPECT_EQ(r.short_group.name, "short");
  EXPECT_EQ(r.short_group.requests, 3u);
  EXPECT_EQ(r.short_group.finished, 2u);
  EXPECT_NEAR(r.short_group.ttft.p99, 1.99, kEps);
  EXPECT_EQ(r.long_group.name, "long");
  EXPECT_TRUE(r.long_group.is_long);
  EXPECT_EQ(r.long_group.requests, 1u);
  EXPECT_NEAR(r.long_group.ttft.p50, 4.0, kEps);
  EXPECT_NEAR(report_to_json(r)["short"]["ttft"]["p50"].get<double>(), 1.5, kEps);
  EXPECT_EQ(report_to_json(r)["long"]["requests"], 1);
}

TEST(Report, KvTransferCountsOnlyMovedFinishedRequests) {
  auto records = hand_records();
  records[0].kv_transfer_seconds = 0.010;  // short, finished
  records[1].kv_transfer_seconds = 0.030;  // long, finished
  records[3].kv_transfer_seconds = 0.500;  // unfinished: left out like its other latencies
  // Waits for room on the decode engine: the moved requests' only, a wait of 0 counted.
  records[0].kv_wait_seconds = 0.0;
  records[1].kv_wait_seconds = 2.0;
  records[2].kv_wait_seconds = 7.0;  // did not move (no transfer): not a wait
  records[3].kv_wait_seconds = 9.0;
  const Report r = build_report(hand_workload(), records, 1, 6, 1);
  EXPECT_EQ(r.classes[0].kv_transfer.count, 1u);
  EXPECT_NEAR(r.classes[0].kv_transfer.p99, 0.010, kEps);
  EXPECT_EQ(r.classes[1].kv_transfer.count, 1u);
  EXPECT_EQ(r.overall.kv_transfer.count, 2u);
  EXPECT_NEAR(r.overall.kv_transfer.p50, 0.020, kEps);
  EXPECT_NEAR(r.overall.kv_transfer.p99, 0.0298, kEps);
  EXPECT_EQ(r.overall.kv_wait.count, 2u);
  EXPECT_NEAR(r.overall.kv_wait.p50, 1.0, kEps);
  EXPECT_NEAR(r.overall.kv_wait.max, 2.0, kEps);
  EXPECT_NEAR(r.classes[0].kv_wait.max, 0.0, kEps);

  std::ostringstream out;
  print_report(out, r);
  EXPECT_NE(out.str().find("KV transfer"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("KV wait"), std::string::npos) << out.str();
  EXPECT_NEAR(report_to_json(r)["overall"]["kv_transfer"]["p99"].get<double>(), 0.0298, kEps);
  EXPECT_NEAR(report_to_json(r)["overall"]["kv_wait"]["max"].get<double>(), 2.0, kEps);

  // Nothing moved: no KV table in print (only noise), count 0 in JSON.
  const Report none = build_report(hand_workload(), hand_records(), 1, 6, 1);
  std::ostringstream plain;
  print_report(plain, none);
  EXPECT_EQ(plain.str().find("KV transfer"), std::string::npos) << plain.str();
  EXPECT_EQ(plain.str().find("KV wait"), std::string::npos) << plain.str();
  EXPECT_EQ(report_to_json(none)["overall"]["kv_transfer"]["count"], 0);
}

// A client measuring a server (bench) cannot see when a request was scheduled: no queue samples,
// and no table of dashes.
TEST(Report, QueueTimesUnknownToTheClientLeaveNoTable) {
  std::ostringstream with_queue;
  print_report(with_queue, build_report(hand_workload(), hand_records(), 1, 6, 1));
  EXPECT_NE(with_queue.str().find("\nqueue "), std::string::npos) << with_queue.str();
  auto records = hand_records();
  for (RequestRecord& r : records) r.scheduled = std::nan("");
  const Report unseen = build_report(hand_workload(), records, 1, 6, 1);
  EXPECT_EQ(unseen.overall.queue.count, 0u);
  std::ostringstream out;
  print_report(out, unseen);
  EXPECT_EQ(out.str().find("\nqueue "), std::string::npos) << out.str();
}

TEST(Report, GoodputLineAndJson) {
  const auto records = hand_records();
  Report r = build_report(hand_workload(), records, 1, 6, 1);
  EXPECT_TRUE(report_to_json(r)["goodput"].is_null());
  Slo slo;
  slo.ttft = 1.5;  // meets: request 0 (TTFT 1.0); not: 2 (2.0), 1 (4.0), 3 (unfinished)
  add_goodput(r, slo, records);
  ASSERT_TRUE(r.goodput);
  EXPECT_EQ(r.goodput->met, 1u);
  EXPECT_NEAR(r.goodput->requests_per_s, 1.0 / 6.0, kEps);
  std::ostringstream out;
  print_report(out, r);
  EXPECT_NE(out.str().find("1 of 4 requests meet ttft=1.5s"), std::string::npos) << out.str();
  EXPECT_EQ(report_to_json(r)["goodput"]["slo"], "ttft=1.5s");
}

}  // namespace
}  // namespace headway::core
