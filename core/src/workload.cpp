#include "headway/core/workload.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <numbers>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <system_error>

#include "headway/core/error.h"
#include "headway/core/input_file.h"
#include "toml_line.h"

namespace headway::core {

bool Workload::has_long_requests() const {
  return std::any_of(requests.begin(), requests.end(), [&](const WorkloadRequest& r) {
    return r.class_index < classes.size() && classes[r.class_index].is_long;
  });
}

Workload Workload::without_long_classes() const {
  Workload out;
  out.source = source;
  out.seed = seed;
  out.classes = classes;
  out.warnings = warnings;
  out.requests.reserve(requests.size());
  for (const WorkloadRequest& r : requests) {
    if (r.class_index < classes.size() && !classes[r.class_index].is_long)
      out.requests.push_back(r);
  }
  return out;
}

bool same_requests(const Workload& a, const Workload& b) {
  return std::equal(a.requests.begin(), a.requests.end(), b.requests.begin(), b.requests.end(),
                    [](const WorkloadRequest& x, const WorkloadRequest& y) {
                      return x.class_index == y.class_index && x.arrival == y.arrival &&
                             x.prompt_tokens == y.prompt_tokens &&
                             x.output_tokens == y.output_tokens && x.priority == y.priority &&
                             x.shared_prefix_tokens == y.shared_prefix_tokens &&
                             x.shared_prefix == y.shared_prefix && x.max_tokens == y.max_tokens &&
                             x.turn == y.turn && x.conversation_id() == y.conversation_id();
                    });
}

namespace {

// Upper bound for any token count: keeps sums of a few thousand requests far from overflow and is
// well above any context length a model supports.
constexpr int64_t kMaxTokens = int64_t{1} << 30;
constexpr int64_t kMaxSharedPrefixes = 65536;
constexpr int64_t kMaxTurns = 1000;

// A well-mixed hash of one word (SplitMix64's finaliser).
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// Upper bound on the number of requests one workload may hold (memory guard against typos such as
// a rate or duration off by orders of magnitude).
constexpr int64_t kMaxRequests = 100'000'000;

constexpr std::string_view kTimestampColumn = "TIMESTAMP";
constexpr std::string_view kContextColumn = "ContextTokens";
constexpr std::string_view kGeneratedColumn = "GeneratedTokens";

std::string join_list(std::initializer_list<std::string_view> items) {
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

std::string key_path(const std::string& table, std::string_view key) {
  return table.empty() ? std::string(key) : table + "." + std::string(key);
}

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// ---- Portable random sampling. std::*_distribution results differ between standard libraries;
// only mt19937_64's raw output is specified, so every distribution below is written out here.

using Rng = std::mt19937_64;

// Uniform in [0, 1) with 53 random bits.
double uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform integer in [0, n), n >= 1, without modulo bias (rejects the low 2^64 mod n outputs).
uint64_t uniform_below(Rng& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

// Exponential with mean 1.
double exponential(Rng& rng) { return -std::log1p(-uniform01(rng)); }

// Standard normal by Box-Muller (cosine branch only, one normal per two uniforms).
double standard_normal(Rng& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]: log is finite
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Index drawn with probability weight[i] / sum(weights); `cumulative` is the running sum.
size_t categorical(Rng& rng, const std::vector<double>& cumulative) {
  const double u = uniform01(rng) * cumulative.back();
  const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
  return std::min(static_cast<size_t>(it - cumulative.begin()), cumulative.size() - 1);
}

// ---- Traces

struct TraceRow {
  int64_t seconds = 0;   // whole seconds (since the civil epoch, or as written)
  double fraction = 0;   // [0, 1)
  uint32_t context = 0;  // clamped to >= 1
  uint32_t generated = 0;
};

// Seconds from `a` to `b`: negative when b is stamped earlier.
double seconds_between(const TraceRow& a, const TraceRow& b) {
  return static_cast<double>(b.seconds - a.seconds) + (b.fraction - a.fraction);
}

struct Trace {
  std::string display;  // path as shown in messages
  std::vector<TraceRow> rows;
  // Rows stamped earlier than the row before them: (index into rows, line in the file), in order.
  std::vector<std::pair<size_t, size_t>> backward;
};

int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool parse_digits(std::string_view s, size_t pos, size_t n, int64_t& out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = v;
  return true;
}

// Days in a month of the Gregorian calendar: 2023-02-30 is no date (days_from_civil would make it
// March 2nd, moving the row's arrival without a word).
int64_t days_in_month(int64_t year, int64_t month) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// `YYYY-MM-DD HH:MM:SS[.fraction]` (a 'T' separator is accepted too) or plain non-negative seconds.
bool parse_timestamp(std::string_view s, int64_t& seconds, double& fraction) {
  int64_t y, mo, d, h, mi, sec;
  if (s.size() >= 19 && s[4] == '-' && s[7] == '-' && (s[10] == ' ' || s[10] == 'T') &&
      s[13] == ':' && s[16] == ':') {
    if (!parse_digits(s, 0, 4, y) || !parse_digits(s, 5, 2, mo) || !parse_digits(s, 8, 2, d) ||
        !parse_digits(s, 11, 2, h) || !parse_digits(s, 14, 2, mi) || !parse_digits(s, 17, 2, sec)) {
      return false;
    }
    // Second 60: a leap second, which is the next minute's second 0 in seconds since an epoch.
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60) {
      return false;
    }
    fraction = 0;
    if (s.size() > 19) {
      if (s[19] != '.' || s.size() == 20) return false;
      double scale = 0.1;
      for (size_t i = 20; i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        fraction += (s[i] - '0') * scale;
        scale *= 0.1;
      }
    }
    seconds = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
              h * 3600 + mi * 60 + sec;
    return true;
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  // Whole seconds must fit int64 (converting a larger double is undefined behaviour).
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0 || v >= 9e18) {
    return false;
  }
  seconds = static_cast<int64_t>(std::floor(v));
  fraction = v - std::floor(v);
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Parses the whole CSV. `where` ("workload.toml: trace.file") prefixes every message.
std::unique_ptr<Trace> read_trace(const std::filesystem::path& path, const std::string& where) {
  auto trace = std::make_unique<Trace>();
  trace->display = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(where + ": cannot open trace file \"" + trace->display + "\" (" +
                    unreadable_reason(path) + ")",
                HW_NOT_FOUND);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where + ": cannot open trace file \"" + trace->display + "\"", HW_NOT_FOUND);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Spreadsheets save CSV with a UTF-8 byte order mark; it is not part of the first column's name.
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);

  const auto fail = [&](size_t line, const std::string& msg) {
    throw Error(where + ": " + trace->display + ":" + std::to_string(line) + ": " + msg);
  };

  size_t pos = 0;
  size_t line_no = 0;
  const auto next_line = [&](std::string_view& line) {
    if (pos >= text.size()) return false;
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    line = std::string_view(text).substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = end + 1;
    ++line_no;
    return true;
  };

  std::string_view header;
  if (!next_line(header))
    fail(1, "empty file (expected a header TIMESTAMP,ContextTokens,GeneratedTokens)");
  size_t n_columns = 0;
  size_t ts_col = SIZE_MAX, ctx_col = SIZE_MAX, gen_col = SIZE_MAX;
  {
    size_t start = 0;
    for (;;) {
      const size_t comma = header.find(',', start);
      const std::string_view name =
          trim(header.substr(start, comma == std::string_view::npos ? header.npos : comma - start));
      if (name == kTimestampColumn) ts_col = n_columns;
      if (name == kContextColumn) ctx_col = n_columns;
      if (name == kGeneratedColumn) gen_col = n_columns;
      ++n_columns;
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  if (ts_col == SIZE_MAX || ctx_col == SIZE_MAX || gen_col == SIZE_MAX) {
    fail(1, "header \"" + std::string(header) +
                "\" must have the columns TIMESTAMP, ContextTokens and GeneratedTokens");
  }

  trace->rows.reserve(text.size() / 40 + 1);
  std::vector<std::string_view> fields(n_columns);
  std::string_view line;
  while (next_line(line)) {
    if (trim(line).empty()) continue;
    size_t count = 0, start = 0;
    for (;;) {
      const size_t comma = line.find(',', start);
      if (count < n_columns) {
        fields[count] =
            trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start));
      }
      ++count;
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (count != n_columns) {
      fail(line_no, "expected " + std::to_string(n_columns) + " fields, got " +
                        std::to_string(count) + ": \"" + std::string(line) + "\"");
    }
    TraceRow row;
    if (!parse_timestamp(fields[ts_col], row.seconds, row.fraction)) {
      fail(line_no, "bad TIMESTAMP \"" + std::string(fields[ts_col]) +
                        "\" (expected YYYY-MM-DD HH:MM:SS[.fraction] or seconds >= 0)");
    }
    const auto parse_tokens = [&](size_t col, std::string_view name) -> uint32_t {
      const std::string_view f = fields[col];
      int64_t v = -1;
      const auto [end, err] = std::from_chars(f.data(), f.data() + f.size(), v);
      if (err != std::errc() || end != f.data() + f.size() || v < 0 || v > kMaxTokens) {
        fail(line_no, "bad " + std::string(name) + " \"" + std::string(f) +
                          "\" (expected an integer in [0, " + std::to_string(kMaxTokens) + "])");
      }
      // Every request has at least one prompt token and produces at least one output token.
      return static_cast<uint32_t>(std::max<int64_t>(v, 1));
    };
    row.context = parse_tokens(ctx_col, kContextColumn);
    row.generated = parse_tokens(gen_col, kGeneratedColumn);
    if (!trace->rows.empty() && seconds_between(trace->rows.back(), row) < 0) {
      trace->backward.emplace_back(trace->rows.size(), line_no);
    }
    trace->rows.push_back(row);
  }
  if (trace->rows.empty()) fail(line_no, "no data rows after the header");
  return trace;
}

// ---- The parser

struct Dist {
  enum Kind { kFixed, kUniform, kLogNormal, kTrace } kind = kFixed;
  uint32_t value = 1;
  uint32_t min = 1, max = 1;
  double mu = 0, sigma = 0;
  const Trace* trace = nullptr;
  bool context_column = true;
  double nominal_mean = 0;

  // The largest value sample() can return.
  uint32_t upper_bound() const {
    switch (kind) {
      case kFixed:
        return value;
      case kUniform:
      case kLogNormal:
        return max;
      case kTrace: {
        uint32_t most = 0;
        for (const TraceRow& row : trace->rows) {
          most = std::max(most, context_column ? row.context : row.generated);
        }
        return most;
      }
    }
    return max;
  }

  uint32_t sample(Rng& rng) const {
    switch (kind) {
      case kFixed:
        return value;
      case kUniform:
        return min + static_cast<uint32_t>(uniform_below(rng, uint64_t{max} - min + 1));
      case kLogNormal: {
        const double x = std::exp(mu + sigma * standard_normal(rng));
        const double r = std::round(x);
        if (!(r >= min)) return min;  // also catches NaN
        if (r >= max) return max;
        return static_cast<uint32_t>(r);
      }
      case kTrace: {
        const TraceRow& row = trace->rows[uniform_below(rng, trace->rows.size())];
        return context_column ? row.context : row.generated;
      }
    }
    return 1;
  }
};

struct ClassSpec {
  RequestClass cls;
  std::optional<bool> long_flag;
  Dist prompt, output;
};

// A request drawn, before the workload's ids are given in arrival order.
struct Pending {
  uint32_t class_index;
  double arrival;
  uint32_t prompt, output;
  uint32_t turn = 0;
  // Of a conversation's turns, the first's index in the drawn list (before sorting; <
  // kMaxRequests); kAlone for a request on its own.
  uint32_t conversation = kAlone;
  static constexpr uint32_t kAlone = UINT32_MAX;
};

class Parser {
 public:
  Parser(const std::filesystem::path& file, std::optional<uint64_t> seed)
      : file_(file), name_(file.string()), seed_override_(seed) {}

  // Parses `text` when given, else reads the file.
  Workload run(std::optional<std::string_view> text);

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    throw Error(name_ + ": " + path + line_at(path) + ": " + msg);
  }

  // " (line N)" of the node at `path` ("classes[2].prompt"), or of the nearest table above it that
  // exists (an unknown or a missing key), as deployment files' errors say; "" without one.
  std::string line_at(const std::string& path) const {
    if (root_ == nullptr || path.empty()) return {};
    try {
      for (toml::path p(path); !p.empty(); p = p.parent()) {
        if (const toml::node* node = toml::at_path(*root_, p).node(); node != nullptr) {
          return line_of(*node);
        }
      }
    } catch (const std::exception&) {
      // A path toml++ does not parse: the message stands without its line.
    }
    return {};
  }

  void check_keys(const toml::table& t, const std::string& path,
                  std::initializer_list<std::string_view> allowed) const {
    for (const auto& [key, node] : t) {
      const std::string_view k = key.str();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        fail(key_path(path, k), "unknown key (allowed " +
                                    (path.empty() ? std::string("at top level") : "in " + path) +
                                    ": " + join_list(allowed) + ")");
      }
    }
  }

  std::optional<double> get_number(const toml::table& t, const std::string& path,
                                   std::string_view key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return std::nullopt;
    double v;
    if (const auto* i = n->as_integer()) {
      v = static_cast<double>(i->get());
    } else if (const auto* f = n->as_floating_point()) {
      v = f->get();
    } else {
      fail(key_path(path, key), "expected a number, got " + type_name(*n));
    }
    if (!std::isfinite(v)) fail(key_path(path, key), "must be a finite number");
    return v;
  }

  std::optional<int64_t> get_int(const toml::table& t, const std::string& path,
                                 std::string_view key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return std::nullopt;
    const auto* i = n->as_integer();
    if (i == nullptr) fail(key_path(path, key), "expected an integer, got " + type_name(*n));
    return i->get();
  }

  std::optional<std::string> get_string(const toml::table& t, const std::string& path,
                                        std::string_view key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return std::nullopt;
    const auto* s = n->as_string();
    if (s == nullptr) fail(key_path(path, key), "expected a string, got " + type_name(*n));
    return s->get();
  }

  std::optional<bool> get_bool(const toml::table& t, const std::string& path,
                               std::string_view key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return std::nullopt;
    const auto* b = n->as_boolean();
    if (b == nullptr) fail(key_path(path, key), "expected true or false, got " + type_name(*n));
    return b->get();
  }

  const toml::table* get_table(const toml::table& t, const std::string& path,
                               std::string_view key) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return nullptr;
    const auto* tab = n->as_table();
    if (tab == nullptr) fail(key_path(path, key), "expected a table, got " + type_name(*n));
    return tab;
  }

  // A required integer in [lo, hi].
  int64_t int_in(const toml::table& t, const std::string& path, std::string_view key, int64_t lo,
                 int64_t hi, const std::string& what) const {
    const auto v = get_int(t, path, key);
    if (!v) fail(key_path(path, key), "missing (required: " + what + ")");
    if (*v < lo || *v > hi) {
      fail(key_path(path, key), "must be " + what + " (got " + std::to_string(*v) + ")");
    }
    return *v;
  }

  // A class's (or the trace's) max_tokens: 0 when the key is absent.
  uint32_t max_tokens_of(const toml::table& t, const std::string& path) const {
    if (!t.contains("max_tokens")) return 0;
    return static_cast<uint32_t>(int_in(t, path, "max_tokens", 1, kMaxTokens,
                                        "an integer in [1, " + std::to_string(kMaxTokens) + "]"));
  }

  // An optional number > 0 (finite).
  std::optional<double> positive(const toml::table& t, const std::string& path,
                                 std::string_view key) const {
    const auto v = get_number(t, path, key);
    if (v && !(*v > 0)) fail(key_path(path, key), "must be > 0 (got " + number_text(*v) + ")");
    return v;
  }

  std::filesystem::path resolve(const std::string& p) const {
    std::filesystem::path path(p);
    if (path.is_relative()) path = file_.parent_path() / path;
    return path.lexically_normal();
  }

  const Trace& trace(const std::string& p, const std::string& key) {
    const std::filesystem::path path = resolve(p);
    auto& slot = traces_[path.string()];
    if (!slot) slot = read_trace(path, name_ + ": " + key);
    return *slot;
  }

  Dist parse_dist(const toml::table& parent, const std::string& path, std::string_view key,
                  bool is_prompt);
  std::vector<ClassSpec> parse_classes(const toml::table& root);
  // Appends the later turns of each conversation that `pending` starts (RequestClass::turns).
  void expand_conversations(std::vector<Pending>& pending, const std::vector<ClassSpec>& specs,
                            uint64_t seed, std::optional<double> duration) const;

  std::filesystem::path file_;
  std::string name_;
  const toml::table* root_ = nullptr;      // the document being parsed, during run()
  std::optional<uint64_t> seed_override_;  // replaces the file's `seed` when set
  // The rows kept are replayed sorted, from the earliest timestamp: merged logs are often a little
  // out of order, but one early outlier shifts every arrival, and the operator should know.
  void warn_if_out_of_order(const Trace& tr, size_t n_rows) {
    size_t count = 0;
    double largest_step_back = 0;
    for (const auto& [index, line] : tr.backward) {
      if (index >= n_rows) break;
      ++count;
      largest_step_back =
          std::max(largest_step_back, -seconds_between(tr.rows[index - 1], tr.rows[index]));
    }
    if (count == 0) return;
    warnings_.push_back(
        name_ + ": trace.file: " + tr.display + ":" + std::to_string(tr.backward.front().second) +
        ": the trace is not in time order: " + std::to_string(count) +
        " row(s) stamped earlier than the row before them, by up to " +
        number_text(largest_step_back) + " s; replayed in time order from the earliest timestamp");
  }

  std::map<std::string, std::unique_ptr<Trace>> traces_;
  std::vector<std::string> warnings_;
};

Dist Parser::parse_dist(const toml::table& parent, const std::string& parent_path,
                        std::string_view key, bool is_prompt) {
  const std::string path = key_path(parent_path, key);
  const toml::node* node = parent.get(key);
  constexpr std::string_view kAllowed = "fixed, uniform, lognormal, trace";
  if (node == nullptr) {
    fail(path, "missing (required: an inline table such as { dist = \"fixed\", value = 100 })");
  }
  const toml::table* t = node->as_table();
  if (t == nullptr) {
    fail(path,
         "expected an inline table such as { dist = \"uniform\", min = 10, max = 100 }, got " +
             type_name(*node));
  }
  const auto dist = get_string(*t, path, "dist");
  if (!dist) fail(key_path(path, "dist"), "missing (allowed: " + std::string(kAllowed) + ")");
  const std::string range = "an integer in [1, " + std::to_string(kMaxTokens) + "]";
  Dist d;
  if (*dist == "fixed") {
    check_keys(*t, path, {"dist", "value"});
    d.kind = Dist::kFixed;
    d.value = static_cast<uint32_t>(int_in(*t, path, "value", 1, kMaxTokens, range));
    d.nominal_mean = d.value;
  } else if (*dist == "uniform") {
    check_keys(*t, path, {"dist", "min", "max"});
    d.kind = Dist::kUniform;
    d.min = static_cast<uint32_t>(int_in(*t, path, "min", 1, kMaxTokens, range));
    d.max = static_cast<uint32_t>(int_in(*t, path, "max", 1, kMaxTokens, range));
    if (d.max < d.min) {
      fail(key_path(path, "max"),
           "must be >= min (" + std::to_string(d.min) + "), got " + std::to_string(d.max));
    }
    d.nominal_mean = (static_cast<double>(d.min) + d.max) / 2;
  } else if (*dist == "lognormal") {
    check_keys(*t, path, {"dist", "mean", "sigma", "min", "max"});
    d.kind = Dist::kLogNormal;
    const auto mean = get_number(*t, path, "mean");
    if (!mean) fail(key_path(path, "mean"), "missing (required: a number > 0, the mean tokens)");
    if (!(*mean > 0)) fail(key_path(path, "mean"), "must be > 0 (got " + number_text(*mean) + ")");
    const auto sigma = get_number(*t, path, "sigma");
    if (!sigma) fail(key_path(path, "sigma"), "missing (required: a number >= 0)");
    if (!(*sigma >= 0) || *sigma > 10) {
      fail(key_path(path, "sigma"), "must be in [0, 10] (got " + number_text(*sigma) + ")");
    }
    d.min = t->contains("min")
                ? static_cast<uint32_t>(int_in(*t, path, "min", 1, kMaxTokens, range))
                : 1;
    d.max = t->contains("max")
                ? static_cast<uint32_t>(int_in(*t, path, "max", 1, kMaxTokens, range))
                : static_cast<uint32_t>(kMaxTokens);
    if (d.max < d.min) {
      fail(key_path(path, "max"),
           "must be >= min (" + std::to_string(d.min) + "), got " + std::to_string(d.max));
    }
    d.sigma = *sigma;
    d.mu = std::log(*mean) - d.sigma * d.sigma / 2;
    d.nominal_mean = std::clamp(*mean, static_cast<double>(d.min), static_cast<double>(d.max));
  } else if (*dist == "trace") {
    check_keys(*t, path, {"dist", "file", "column"});
    d.kind = Dist::kTrace;
    const auto file = get_string(*t, path, "file");
    if (!file) fail(key_path(path, "file"), "missing (required: path of a trace CSV)");
    const std::string column =
        get_string(*t, path, "column")
            .value_or(std::string(is_prompt ? kContextColumn : kGeneratedColumn));
    if (column != kContextColumn && column != kGeneratedColumn) {
      fail(key_path(path, "column"), "unknown column \"" + column +
                                         "\" (allowed: " + std::string(kContextColumn) + ", " +
                                         std::string(kGeneratedColumn) + ")");
    }
    d.context_column = column == kContextColumn;
    d.trace = &trace(*file, key_path(path, "file"));
    double sum = 0;
    for (const TraceRow& r : d.trace->rows) sum += d.context_column ? r.context : r.generated;
    d.nominal_mean = sum / static_cast<double>(d.trace->rows.size());
  } else {
    fail(key_path(path, "dist"),
         "unknown distribution \"" + *dist + "\" (allowed: " + std::string(kAllowed) + ")");
  }
  return d;
}

std::vector<ClassSpec> Parser::parse_classes(const toml::table& root) {
  std::vector<ClassSpec> specs;
  const toml::node* node = root.get("classes");
  if (node == nullptr) return specs;
  const toml::array* arr = node->as_array();
  if (arr == nullptr) {
    fail("classes", "expected an array of tables ([[classes]]), got " + type_name(*node));
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string path = "classes[" + std::to_string(i) + "]";
    const toml::table* t = (*arr)[i].as_table();
    if (t == nullptr) fail(path, "expected a table, got " + type_name((*arr)[i]));
    check_keys(*t, path,
               {"name", "share", "long", "priority", "max_tokens", "shared_prefix", "conversation",
                "prompt", "output"});
    ClassSpec spec;
    const auto name = get_string(*t, path, "name");
    if (!name || name->empty())
      fail(key_path(path, "name"), "missing (required: a non-empty string)");
    spec.cls.name = *name;
    const auto share = get_number(*t, path, "share");
    if (!share) fail(key_path(path, "share"), "missing (required: a number > 0)");
    if (!(*share > 0) || !std::isfinite(*share)) {
      fail(key_path(path, "share"),
           "must be a finite number > 0 (got " + number_text(*share) + ")");
    }
    spec.cls.share = *share;
    spec.long_flag = get_bool(*t, path, "long");
    const auto priority = get_int(*t, path, "priority");
    if (priority && (*priority < INT32_MIN || *priority > INT32_MAX)) {
      fail(key_path(path, "priority"), "must fit in 32 bits");
    }
    spec.cls.priority = static_cast<int32_t>(priority.value_or(0));
    spec.cls.max_tokens = max_tokens_of(*t, path);
    spec.prompt = parse_dist(*t, path, "prompt", true);
    spec.output = parse_dist(*t, path, "output", false);
    spec.cls.mean_prompt_tokens = spec.prompt.nominal_mean;
    if (const toml::table* conversation = get_table(*t, path, "conversation")) {
      const std::string cp = key_path(path, "conversation");
      check_keys(*conversation, cp, {"turns", "gap", "wait_for_answer"});
      if (!conversation->contains("turns")) {
        fail(key_path(cp, "turns"),
             "missing (required: an integer in [2, " + std::to_string(kMaxTurns) + "])");
      }
      spec.cls.turns =
          static_cast<uint32_t>(int_in(*conversation, cp, "turns", 2, kMaxTurns,
                                       "an integer in [2, " + std::to_string(kMaxTurns) + "]"));
      const std::optional<double> gap = positive(*conversation, cp, "gap");
      if (!gap) fail(key_path(cp, "gap"), "missing (required: seconds between turns, > 0)");
      spec.cls.turn_gap = *gap;
      spec.cls.waits_for_answers = get_bool(*conversation, cp, "wait_for_answer").value_or(false);
      // The mean over the turns: turn k (from 0) holds k + 1 messages and k answers.
      const double turns = spec.cls.turns;
      // Answers are cut at max_tokens, when it is set, before they join the next prompt.
      const double answer = spec.cls.max_tokens != 0
                                ? std::min<double>(spec.output.nominal_mean, spec.cls.max_tokens)
                                : spec.output.nominal_mean;
      spec.cls.mean_prompt_tokens =
          spec.prompt.nominal_mean * (turns + 1) / 2 + answer * (turns - 1) / 2;
    }
    if (const toml::table* shared = get_table(*t, path, "shared_prefix")) {
      const std::string sp = key_path(path, "shared_prefix");
      check_keys(*shared, sp, {"tokens", "count"});
      spec.cls.shared_prefix_tokens =
          static_cast<uint32_t>(int_in(*shared, sp, "tokens", 1, kMaxTokens,
                                       "an integer in [1, " + std::to_string(kMaxTokens) + "]"));
      spec.cls.shared_prefixes = 1;
      if (shared->contains("count")) {
        spec.cls.shared_prefixes = static_cast<uint32_t>(
            int_in(*shared, sp, "count", 1, kMaxSharedPrefixes,
                   "an integer in [1, " + std::to_string(kMaxSharedPrefixes) + "]"));
      }
      spec.cls.mean_prompt_tokens += spec.cls.shared_prefix_tokens;
      if (int64_t{spec.cls.shared_prefix_tokens} + spec.prompt.upper_bound() > kMaxTokens) {
        fail(key_path(sp, "tokens"), "with prompts of up to " +
                                         std::to_string(spec.prompt.upper_bound()) +
                                         " tokens of their own, a prompt could exceed " +
                                         std::to_string(kMaxTokens) + " tokens");
      }
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

void Parser::expand_conversations(std::vector<Pending>& pending,
                                  const std::vector<ClassSpec>& specs, uint64_t seed,
                                  std::optional<double> duration) const {
  const size_t firsts = pending.size();
  for (size_t i = 0; i < firsts; ++i) {
    const Pending first = pending[i];
    const ClassSpec& spec = specs[first.class_index];
    if (spec.cls.turns <= 1) continue;
    pending[i].conversation = static_cast<uint32_t>(i);
    // The later turns' lengths from a generator of their own, so that conversations change no
    // other draw of the workload.
    Rng turn_rng(mix64(seed ^ ((i + 1) * 0xD1B54A32D192ED03ull)));
    uint64_t prompt = first.prompt;
    uint32_t answer = first.output;
    for (uint32_t turn = 1; turn < spec.cls.turns; ++turn) {
      const double t = first.arrival + turn * spec.cls.turn_gap;
      if (duration && t >= *duration) break;
      if (!(t <= kMaxArrivalSeconds)) {
        fail("classes[" + std::to_string(first.class_index) + "].conversation.gap",
             "turn " + std::to_string(turn + 1) + " of a conversation would arrive at " +
                 number_text(t) + " s, beyond the 1e9 s a simulation can time");
      }
      // What the client saw of the previous answer: cut at max_tokens, as its request is.
      if (spec.cls.max_tokens != 0) answer = std::min(answer, spec.cls.max_tokens);
      prompt += uint64_t{answer} + spec.prompt.sample(turn_rng);
      if (prompt + spec.cls.shared_prefix_tokens > static_cast<uint64_t>(kMaxTokens)) {
        fail("classes[" + std::to_string(first.class_index) + "].conversation",
             "turn " + std::to_string(turn + 1) + " of a conversation would have a prompt of " +
                 std::to_string(prompt + spec.cls.shared_prefix_tokens) + " tokens (at most " +
                 std::to_string(kMaxTokens) + ")");
      }
      answer = spec.output.sample(turn_rng);
      pending.push_back({first.class_index, t, static_cast<uint32_t>(prompt), answer, turn,
                         static_cast<uint32_t>(i)});
    }
    if (pending.size() > static_cast<size_t>(kMaxRequests)) {
      fail("classes[" + std::to_string(first.class_index) + "].conversation",
           "the conversations ask for more than " + std::to_string(kMaxRequests) + " requests");
    }
  }
}

Workload Parser::run(std::optional<std::string_view> text) {
  toml::table root;
  try {
    if (text) {
      root = toml::parse(*text, name_);
    } else {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(file_, ec)) {
        throw Error(name_ + ": cannot open workload file (" + unreadable_reason(file_) + ")",
                    HW_NOT_FOUND);
      }
      // Read here, not by toml++: it reports a file it cannot open (no permission) as a TOML
      // syntax error at line 0.
      root = toml::parse(read_text_file(file_), file_.string());
    }
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw Error(name_ + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
                ": invalid TOML: " + std::string(e.description()));
  }
  // The reverse mistake: a deployment given as the workload.
  if (!root.contains("classes") && !root.contains("trace") &&
      (root.contains("engines") || root.contains("model") || root.contains("router"))) {
    throw Error(name_ + ": this is a deployment file (it has '" +
                (root.contains("engines") ? "engines"
                 : root.contains("model") ? "model"
                                          : "router") +
                "'), not a workload: give it with --config, and the workload with --workload");
  }
  root_ = &root;
  // `root` is this call's: fail() may look into it only while run() lasts.
  struct Forget {
    const toml::table*& root;
    ~Forget() { root = nullptr; }
  } forget{root_};
  check_keys(root, "", {"seed", "count", "duration", "time_scale", "arrival", "classes", "trace"});

  Workload w;
  w.source = name_;
  const auto seed = get_int(root, "", "seed");
  if (seed && *seed < 0)
    fail("seed", "must be an integer >= 0 (got " + std::to_string(*seed) + ")");
  w.seed = seed_override_.value_or(static_cast<uint64_t>(seed.value_or(0)));
  Rng rng(w.seed);

  std::optional<int64_t> count;
  if (root.contains("count")) {
    count = int_in(root, "", "count", 1, kMaxRequests,
                   "an integer in [1, " + std::to_string(kMaxRequests) + "]");
  }
  const std::optional<double> duration = positive(root, "", "duration");
  const double time_scale = positive(root, "", "time_scale").value_or(1.0);

  const toml::table* arrival = get_table(root, "", "arrival");
  const toml::table* trace_table = get_table(root, "", "trace");
  std::vector<ClassSpec> specs = parse_classes(root);

  std::vector<Pending> pending;

  if (trace_table != nullptr) {
    if (arrival != nullptr) {
      fail("arrival",
           "not allowed with [trace] (the trace gives the arrivals; mixed-in classes "
           "arrive as a Poisson process over the trace's span)");
    }
    if (count) fail("count", "not allowed with [trace] (use trace.limit)");
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].cls.turns > 1) {
        fail("classes[" + std::to_string(i) + "].conversation",
             "not allowed with [trace] (mixed-in requests stand alone)");
      }
    }
    const std::string tp = "trace";
    check_keys(*trace_table, tp,
               {"file", "name", "limit", "time_scale", "long", "priority", "max_tokens"});
    const auto file = get_string(*trace_table, tp, "file");
    if (!file) fail("trace.file", "missing (required: path of a trace CSV)");
    const Trace& tr = trace(*file, "trace.file");
    std::optional<int64_t> limit;
    if (trace_table->contains("limit")) {
      limit = int_in(*trace_table, tp, "limit", 1, kMaxRequests,
                     "an integer in [1, " + std::to_string(kMaxRequests) + "]");
    }
    const double trace_scale = positive(*trace_table, tp, "time_scale").value_or(1.0);
    ClassSpec tc;
    tc.cls.name = get_string(*trace_table, tp, "name").value_or("trace");
    if (tc.cls.name.empty()) fail("trace.name", "must be a non-empty string");
    tc.long_flag = get_bool(*trace_table, tp, "long");
    const auto priority = get_int(*trace_table, tp, "priority");
    if (priority && (*priority < INT32_MIN || *priority > INT32_MAX)) {
      fail("trace.priority", "must fit in 32 bits");
    }
    tc.cls.priority = static_cast<int32_t>(priority.value_or(0));
    tc.cls.max_tokens = max_tokens_of(*trace_table, tp);

    const size_t n_rows =
        limit ? std::min(tr.rows.size(), static_cast<size_t>(*limit)) : tr.rows.size();
    warn_if_out_of_order(tr, n_rows);
    int64_t sec0 = tr.rows[0].seconds;
    double frac0 = tr.rows[0].fraction;
    for (size_t i = 1; i < n_rows; ++i) {
      const TraceRow& r = tr.rows[i];
      if (r.seconds < sec0 || (r.seconds == sec0 && r.fraction < frac0)) {
        sec0 = r.seconds;
        frac0 = r.fraction;
      }
    }
    double prompt_sum = 0;
    pending.reserve(n_rows);
    for (size_t i = 0; i < n_rows; ++i) {
      const TraceRow& r = tr.rows[i];
      const double t = static_cast<double>(r.seconds - sec0) + (r.fraction - frac0);
      if (duration && t >= *duration) continue;
      pending.push_back({0, t * trace_scale, r.context, r.generated});
      prompt_sum += r.context;
    }
    if (pending.empty()) fail("duration", "keeps none of the trace's rows");
    tc.cls.mean_prompt_tokens = prompt_sum / static_cast<double>(pending.size());
    // Replay order must be arrival order; a sorted trace is left as is.
    std::stable_sort(pending.begin(), pending.end(),
                     [](const Pending& a, const Pending& b) { return a.arrival < b.arrival; });
    const double span = pending.back().arrival;
    const size_t n_trace = pending.size();

    double share_sum = 0;
    for (const ClassSpec& s : specs) share_sum += s.cls.share;
    if (share_sum >= 1) {
      fail("classes",
           "with [trace], each share is a fraction of the total request count, so the "
           "shares must sum to < 1 (they sum to " +
               number_text(share_sum) + ")");
    }
    const double total = static_cast<double>(n_trace) / (1 - share_sum);
    if (total > static_cast<double>(kMaxRequests)) {
      fail("classes", "the shares ask for " + number_text(total) + " requests (at most " +
                          std::to_string(kMaxRequests) + ")");
    }
    specs.insert(specs.begin(), std::move(tc));
    for (size_t c = 1; c < specs.size(); ++c) {
      const auto n = static_cast<size_t>(std::llround(specs[c].cls.share * total));
      // A Poisson process conditioned on n arrivals in [0, span]: normalised cumulative sums of
      // n + 1 exponential gaps are n sorted uniforms, without a sort.
      std::vector<double> cumulative(n + 1);
      double acc = 0;
      for (size_t k = 0; k <= n; ++k) cumulative[k] = acc += exponential(rng);
      for (size_t k = 0; k < n; ++k) {
        const double t = span * (cumulative[k] / acc);
        const uint32_t prompt = specs[c].prompt.sample(rng);
        const uint32_t output = specs[c].output.sample(rng);
        pending.push_back({static_cast<uint32_t>(c), t, prompt, output});
      }
    }
  } else {
    if (arrival == nullptr) {
      fail("arrival",
           "missing: a workload needs [arrival] with [[classes]] (generated) or [trace] "
           "(replay)");
    }
    if (specs.empty()) {
      fail("classes", "missing: a generated workload needs at least one [[classes]] table");
    }
    std::vector<double> cumulative;
    double acc = 0;
    for (const ClassSpec& s : specs) cumulative.push_back(acc += s.cls.share);
    // Past a double's range every draw would fall to the last class (helper-201's review).
    if (!std::isfinite(acc)) {
      fail("classes",
           "the shares add up to more than a double holds; they are proportions: give "
           "them smaller (0.5 and 0.5 for two halves)");
    }
    const auto add = [&](double t) {
      const auto c = static_cast<uint32_t>(categorical(rng, cumulative));
      const uint32_t prompt = specs[c].prompt.sample(rng);
      const uint32_t output = specs[c].output.sample(rng);
      pending.push_back({c, t, prompt, output});
    };

    const std::string ap = "arrival";
    const auto process = get_string(*arrival, ap, "process");
    if (!process) fail("arrival.process", "missing (allowed: poisson, fixed)");
    if (*process == "poisson") {
      check_keys(*arrival, ap, {"process", "rate"});
      const auto rate = get_number(*arrival, ap, "rate");
      if (!rate) fail("arrival.rate", "missing (required: requests per second, a number > 0)");
      if (!(*rate > 0)) {
        fail("arrival.rate", "must be > 0 requests per second (got " + number_text(*rate) + ")");
      }
      if (!count && !duration) {
        fail("count", "missing: a Poisson workload needs count or duration (or both)");
      }
      if (!count && *rate * *duration > static_cast<double>(kMaxRequests)) {
        fail("duration", "rate * duration asks for too many requests (at most " +
                             std::to_string(kMaxRequests) + ")");
      }
      double t = 0;
      for (;;) {
        if (count && pending.size() >= static_cast<size_t>(*count)) break;
        t += exponential(rng) / *rate;
        if (duration && t >= *duration) break;
        add(t);
      }
    } else if (*process == "fixed") {
      check_keys(*arrival, ap, {"process", "times"});
      const toml::node* tn = arrival->get("times");
      if (tn == nullptr) fail("arrival.times", "missing (required: an array of seconds >= 0)");
      const toml::array* times = tn->as_array();
      if (times == nullptr) {
        fail("arrival.times", "expected an array of seconds >= 0, got " + type_name(*tn));
      }
      std::vector<double> ts;
      ts.reserve(times->size());
      for (size_t i = 0; i < times->size(); ++i) {
        const toml::node& e = (*times)[i];
        const std::string path = "arrival.times[" + std::to_string(i) + "]";
        double v;
        if (const auto* iv = e.as_integer()) {
          v = static_cast<double>(iv->get());
        } else if (const auto* fv = e.as_floating_point()) {
          v = fv->get();
        } else {
          fail(path, "expected a number of seconds >= 0, got " + type_name(e));
        }
        if (!std::isfinite(v) || v < 0) {
          fail(path, "must be a number of seconds >= 0 (got " + number_text(v) + ")");
        }
        ts.push_back(v);
      }
      if (ts.empty()) fail("arrival.times", "must not be empty");
      std::stable_sort(ts.begin(), ts.end());
      for (double t : ts) {
        if (count && pending.size() >= static_cast<size_t>(*count)) break;
        if (duration && t >= *duration) break;
        add(t);
      }
    } else {
      fail("arrival.process", "unknown process \"" + *process + "\" (allowed: poisson, fixed)");
    }
  }

  if (pending.empty()) {
    fail(trace_table != nullptr ? "trace" : "arrival",
         "the workload has no requests (is duration shorter than the first arrival?)");
  }
  expand_conversations(pending, specs, w.seed, duration);

  // Class table and the long class(es).
  for (size_t i = 0; i < specs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (specs[i].cls.name == specs[j].cls.name) {
        fail(trace_table == nullptr ? "classes[" + std::to_string(i) + "].name"
                                    : "classes[" + std::to_string(i - 1) + "].name",
             "duplicate class name \"" + specs[i].cls.name + "\"");
      }
    }
  }
  const bool any_explicit = std::any_of(specs.begin(), specs.end(),
                                        [](const ClassSpec& s) { return s.long_flag.has_value(); });
  if (any_explicit) {
    for (ClassSpec& s : specs) s.cls.is_long = s.long_flag.value_or(false);
  } else if (specs.size() >= 2) {
    size_t best = 0;
    for (size_t i = 1; i < specs.size(); ++i) {
      if (specs[i].cls.mean_prompt_tokens > specs[best].cls.mean_prompt_tokens) best = i;
    }
    specs[best].cls.is_long = true;
  }
  for (ClassSpec& s : specs) w.classes.push_back(std::move(s.cls));

  std::stable_sort(pending.begin(), pending.end(),
                   [](const Pending& a, const Pending& b) { return a.arrival < b.arrival; });
  // Say which of the workload's numbers took it past what can be timed.
  if (!pending.empty()) {
    const double last = pending.back().arrival * time_scale;
    if (!(last <= kMaxArrivalSeconds)) {
      fail(time_scale != 1.0 ? "time_scale" : (trace_table != nullptr ? "trace" : "arrival"),
           "the arrivals span " + number_text(last) +
               " s, beyond the 1e9 s a simulation can time (a rate, time_scale or trace "
               "timestamp too extreme?)");
    }
  }
  w.requests.reserve(pending.size());
  // Each conversation's first id, by its first turn's index before sorting (only where there are
  // conversations: a plain workload of many requests pays nothing for them).
  const bool has_conversations = std::any_of(w.classes.begin(), w.classes.end(),
                                             [](const RequestClass& c) { return c.turns > 1; });
  std::vector<uint64_t> conversation_ids(has_conversations ? pending.size() : 0, UINT64_MAX);
  for (size_t i = 0; i < pending.size(); ++i) {
    const Pending& p = pending[i];
    const RequestClass& cls = w.classes[p.class_index];
    WorkloadRequest r{i, p.class_index, p.arrival * time_scale, p.prompt, p.output, cls.priority};
    // A conversation's first turn arrives before its others (gap > 0) and so has the smaller id.
    if (p.turn > 0) {
      r.turn = p.turn;
      r.first_turn = conversation_ids[p.conversation];
      if (r.first_turn == UINT64_MAX) {
        throw Error(name_ + ": turn " + std::to_string(p.turn + 1) +
                        " of a conversation sorted before its first turn (a bug: please report it)",
                    HW_INTERNAL);
      }
    } else if (p.conversation != Pending::kAlone) {
      conversation_ids[p.conversation] = i;
    }
    if (cls.max_tokens != 0) {
      // An answer longer than the limit is cut there (its finish is "length").
      r.output_tokens = std::min(r.output_tokens, cls.max_tokens);
      r.max_tokens = cls.max_tokens;
    }
    if (cls.shared_prefix_tokens > 0) {
      // Its shared beginning comes before its own tokens (parsing checked that the sum fits).
      // Chosen by a hash, not by the generator, so that a class's shared prefix leaves every other
      // draw of the workload as it was.
      r.prompt_tokens += cls.shared_prefix_tokens;
      r.shared_prefix_tokens = cls.shared_prefix_tokens;
      // By its conversation, so that every turn of one begins with the same (a request on its own
      // is its own conversation).
      r.shared_prefix = static_cast<uint32_t>(
          mix64(w.seed ^ (r.conversation_id() * 0x9E3779B97F4A7C15ull)) % cls.shared_prefixes);
    }
    w.requests.push_back(r);
  }
  w.warnings = std::move(warnings_);
  return w;
}

}  // namespace

Workload load_workload(const std::filesystem::path& file, std::optional<uint64_t> seed) {
  return Parser(file, seed).run(std::nullopt);
}

Workload parse_workload(std::string_view text, const std::filesystem::path& file,
                        std::optional<uint64_t> seed) {
  return Parser(file, seed).run(text);
}

}  // namespace headway::core
