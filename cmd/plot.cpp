#include "plot.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>

namespace headway::cmd {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPackageHint =
    "install the Debian package gnuplot-nox (apt-get install gnuplot-nox)";
// A CDF needs no more points than a PNG has pixels across; more only slows gnuplot down.
constexpr size_t kMaxCdfPoints = 2000;

// gnuplot single-quoted string: only the quote itself needs escaping, by doubling it.
std::string gp_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// POSIX shell single-quoted word: a quote ends the word, is escaped, and a new word starts.
std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Owns a fresh directory under the system temp dir and removes it with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "headway_plot_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw core::Error("--plot: cannot create a temporary directory under " +
                        fs::temp_directory_path().string());
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::ofstream open_for_writing(const fs::path& file) {
  std::ofstream out(file);
  if (!out) throw core::Error(file.string() + ": cannot open for writing (--plot)");
  return out;
}

// Sorted TTFTs of one class of one run with their cumulative fraction, thinned evenly by rank.
// Returns false when the class has no finished request (nothing to draw).
bool write_cdf(const fs::path& file, const std::vector<core::RequestRecord>& records,
               uint32_t class_index) {
  std::vector<double> ttft;
  for (const core::RequestRecord& r : records) {
    // Log-scale x cannot show 0; a TTFT is positive anyway, the floor only guards the axis.
    if (r.finished && r.class_index == class_index)
      ttft.push_back(std::max(r.first_token - r.arrival, 1e-6));
  }
  if (ttft.empty()) return false;
  std::sort(ttft.begin(), ttft.end());
  std::ofstream out = open_for_writing(file);
  const size_t n = ttft.size();
  const size_t stride = std::max<size_t>(1, n / kMaxCdfPoints);
  for (size_t i = 0; i < n; i += stride) {
    out << fmt::format("{:.9g} {:.9g}\n", ttft[i], static_cast<double>(i + 1) / n);
  }
  if ((n - 1) % stride != 0) out << fmt::format("{:.9g} 1\n", ttft.back());
  return true;
}

// Largest gap between consecutive tokens of short requests per bin, the gap placed at the time
// its later token was emitted, relative to `center`. Empty bins are left out.
bool write_itl(const fs::path& file, const core::Workload& workload,
               const std::vector<core::RequestRecord>& records, double center,
               const PlotOptions& options) {
  std::map<long, double> max_gap;
  for (const core::RequestRecord& r : records) {
    if (r.class_index >= workload.classes.size() || workload.classes[r.class_index].is_long)
      continue;
    for (size_t i = 1; i < r.token_times.size(); ++i) {
      const double t = r.token_times[i] - center;
      if (t < -options.window_seconds || t > options.window_seconds) continue;
      const long bin = static_cast<long>(std::floor(t / options.bin_seconds));
      double& slot = max_gap[bin];
      slot = std::max(slot, r.token_times[i] - r.token_times[i - 1]);
    }
  }
  if (max_gap.empty()) return false;
  std::ofstream out = open_for_writing(file);
  for (const auto& [bin, gap] : max_gap) {
    out << fmt::format("{:.6g} {:.9g}\n", (bin + 0.5) * options.bin_seconds, std::max(gap, 1e-6));
  }
  return true;
}

std::string first_line_of(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

void require_gnuplot() {
  // `command -v` is the POSIX way to ask the shell's PATH lookup without running the tool.
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    throw core::Error(
        fmt::format("--plot needs gnuplot, which is not on the PATH: {}", kPackageHint));
  }
}

void write_plot(const fs::path& png, const core::Workload& workload,
                const std::vector<PlotRun>& runs, const PlotOptions& options) {
  require_gnuplot();
  TempDir dir;

  // Window centre: the first long request that arrives a full window after the workload starts,
  // so that the calm before the prefill is in the picture too (else the first long request).
  const double start = workload.requests.empty() ? 0 : workload.requests.front().arrival;
  double center = start + options.window_seconds;
  bool has_long = false, centred = false;
  std::vector<double> long_arrivals;
  for (const core::WorkloadRequest& w : workload.requests) {
    if (w.class_index >= workload.classes.size() || !workload.classes[w.class_index].is_long)
      continue;
    if (!has_long || (!centred && w.arrival >= start + options.window_seconds)) {
      centred = w.arrival >= start + options.window_seconds;
      center = w.arrival;
    }
    has_long = true;
    long_arrivals.push_back(w.arrival);
  }

  std::string cdf_plots;
  std::vector<std::string> itl_files(runs.size());  // empty: no gap in the window
  for (size_t d = 0; d < runs.size(); ++d) {
    if (runs[d].records == nullptr) continue;
    const int colour = static_cast<int>(d % 8) + 1;
    for (uint32_t c = 0; c < workload.classes.size(); ++c) {
      const fs::path data = dir.path() / fmt::format("ttft_{}_{}.dat", d, c);
      if (!write_cdf(data, *runs[d].records, c)) continue;
      cdf_plots +=
          fmt::format("{}{} using 1:2 with lines lc {} dt {} lw 2 title {}",
                      cdf_plots.empty() ? "" : ", \\\n  ", gp_quoted(data.string()), colour, c + 1,
                      gp_quoted(runs[d].deployment + " / " + workload.classes[c].name));
    }
    const fs::path itl = dir.path() / fmt::format("itl_{}.dat", d);
    if (write_itl(itl, workload, *runs[d].records, center, options)) itl_files[d] = itl.string();
  }
  if (cdf_plots.empty()) {
    throw core::Error("--plot: no deployment finished any request; nothing to draw");
  }

  // Layout: the CDF panel on top, then one small stall panel per deployment with shared axes
  // (overlaid step lines of several deployments hide each other).
  constexpr int kCdfHeight = 620, kStallHeight = 200, kMargin = 40;
  const int height = kCdfHeight + kStallHeight * static_cast<int>(runs.size()) + kMargin;
  const double cdf_size = static_cast<double>(kCdfHeight) / height;
  const double stall_size = static_cast<double>(kStallHeight) / height;
  std::string script = fmt::format(
      "set terminal pngcairo size 1400,{} font ',11' noenhanced\n"
      "set output {}\n"
      "set multiplot\n"
      "set grid\n"
      "set origin 0,{:.6f}\n"
      "set size 1,{:.6f}\n"
      "set title 'TTFT CDF per class (colour: deployment, dash: class)'\n"
      "set logscale x\n"
      "set xlabel 'TTFT (s, log scale)'\n"
      "set ylabel 'fraction of requests'\n"
      "set yrange [0:1]\n"
      "set key bottom right\n"
      "plot {}\n"
      "unset logscale x\n"
      "set logscale y\n"
      "set yrange [0.005:20]\n"
      "set xrange [{}:{}]\n"
      "set xlabel ''\n"
      "set ylabel 'max ITL (s)'\n"
      "set key top left\n",
      height, gp_quoted(png.string()), 1 - cdf_size, cdf_size, cdf_plots, -options.window_seconds,
      options.window_seconds);
  for (double a : long_arrivals) {
    const double t = a - center;
    if (t < -options.window_seconds || t > options.window_seconds) continue;
    script += fmt::format(
        "set arrow from {:.6g}, graph 0 to {:.6g}, graph 1 nohead dt 3 lw 1.5 lc rgb 'gray30'\n", t,
        t);
  }
  const std::string what =
      has_long ? fmt::format(
                     "largest inter-token gap of short requests per {:g} s, around the "
                     "long request arriving at t = {:.1f} s (dotted: long arrivals)",
                     options.bin_seconds, center)
               : fmt::format("largest inter-token gap per {:g} s (the workload has no long class)",
                             options.bin_seconds);
  for (size_t d = 0; d < runs.size(); ++d) {
    const bool last = d + 1 == runs.size();
    script += fmt::format("set origin 0,{:.6f}\nset size 1,{:.6f}\n",
                          1 - cdf_size - stall_size * static_cast<double>(d + 1), stall_size);
    script += fmt::format("set title {}\n", gp_quoted(d == 0 ? what : std::string()));
    if (last) {
      script += fmt::format(
          "set xlabel {}\n",
          gp_quoted(has_long ? "time since that long request arrived (s)" : "time (s)"));
    }
    const int colour = static_cast<int>(d % 8) + 1;
    script += itl_files[d].empty()
                  ? fmt::format("plot NaN title {}\n",
                                gp_quoted(runs[d].deployment + " (no gaps in the window)"))
                  : fmt::format("plot {} using 1:2 with steps lc {} lw 1.5 title {}\n",
                                gp_quoted(itl_files[d]), colour, gp_quoted(runs[d].deployment));
  }
  script += "unset multiplot\n";

  const fs::path script_file = dir.path() / "plot.gp";
  open_for_writing(script_file) << script;
  const fs::path errors = dir.path() / "gnuplot.err";
  std::error_code ignored;
  fs::remove(png, ignored);  // so that a stale file cannot pass for this run's output
  const int status = std::system(fmt::format("gnuplot {} 2>{}", shell_quoted(script_file.string()),
                                             shell_quoted(errors.string()))
                                     .c_str());
  if (status != 0) {
    throw core::Error(fmt::format(
        "--plot: gnuplot failed (exit status {}): {}", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
        first_line_of(errors).empty() ? "(it printed nothing)" : first_line_of(errors)));
  }
  if (!fs::exists(png) || fs::file_size(png) == 0) {
    throw core::Error(fmt::format("--plot: gnuplot wrote no image to {}", png.string()));
  }
}

}  // namespace headway::cmd
