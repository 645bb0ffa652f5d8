// `headway simulate --plot out.png`: draws the runs of a comparison with gnuplot (Debian package
// gnuplot-nox), run as a subprocess on data files and a script written to a temporary directory.
//
// Panels:
//   (a) TTFT CDF per class per deployment, log-scale x: colour = deployment, dash = class.
//   (b) stalls around a long prefill: for each deployment, the largest inter-token gap of the
//       short (non-long) requests in each `bin_seconds` bin, against time relative to the arrival
//       of the workload's first long request, over +-`window_seconds`; log-scale y. Arrivals of
//       long requests in the window are marked with vertical lines. Without a long class the
//       window starts at the first arrival.
//
// Threading: single-threaded; runs a child process and blocks until it exits.
#pragma once

#include <headway/core/request_record.h>
#include <headway/core/workload.h>

#include <filesystem>
#include <string>
#include <vector>

namespace headway::cmd {

struct PlotRun {
  std::string deployment;
  const std::vector<core::RequestRecord>* records = nullptr;  // borrowed; in workload order
};

struct PlotOptions {
  double window_seconds = 60;
  double bin_seconds = 0.5;
};

// Throws core::Error with one line naming the package when gnuplot is not on the PATH. Called
// before the simulations so that a missing tool does not cost a long run.
void require_gnuplot();

// Writes the PNG to `png`. Throws core::Error when gnuplot fails (with its first error line) or
// leaves no file.
void write_plot(const std::filesystem::path& png, const core::Workload& workload,
                const std::vector<PlotRun>& runs, const PlotOptions& options = {});

}  // namespace headway::cmd
