#include <fmt/format.h>
#include <headway/core/error.h>
#include <headway/core/file_output.h>
#include <headway/core/guarded_buffer.h>
#include <headway/core/step_profiler.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>

namespace headway::core {
namespace {

constexpr size_t kTerms = 5;
using Row = std::array<double, kTerms>;

Row regressors(const StepFeatures& f) {
  return {1.0, f.tokens, f.sampled, f.attention_pairs, f.kv_tokens};
}

uint64_t blocks_of(const ProfileSlice& s, uint32_t block_size) {
  return (static_cast<uint64_t>(s.start) + s.tokens + block_size - 1) / block_size;
}

uint64_t blocks_of(const ProfileShape& shape, uint32_t block_size) {
  uint64_t blocks = 0;
  for (const ProfileSlice& s : shape.slices) blocks += blocks_of(s, block_size);
  return blocks;
}

ProfileShape prefill(uint32_t start, uint32_t tokens) {
  // A prefill chunk samples only when it is the prompt's last; the chunks after a cached prefix
  // are taken as middle chunks so that both kinds are in the grid.
  return {fmt::format("prefill {} @ {}", tokens, start), {{start, tokens, start == 0}}};
}

ProfileShape decode(uint32_t batch, uint32_t context) {
  ProfileShape shape{fmt::format("decode {} x @ {}", batch, context), {}};
  shape.slices.assign(batch, ProfileSlice{context, 1, true});
  return shape;
}

ProfileShape mixed(uint32_t chunk, uint32_t chunk_start, uint32_t batch, uint32_t context) {
  ProfileShape shape = decode(batch, context);
  shape.label = fmt::format("mixed {} @ {} + {} x @ {}", chunk, chunk_start, batch, context);
  shape.slices.push_back({chunk_start, chunk, true});
  return shape;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Least squares on the columns in `mask` by Householder QR. Returns false when those columns are
// (numerically) dependent: a smaller subset then covers the same fit.
bool solve_subset(const std::vector<Row>& a, const std::vector<double>& b, unsigned mask, Row& x,
                  double& residual) {
  std::vector<size_t> cols;
  for (size_t j = 0; j < kTerms; ++j) {
    if (mask & (1u << j)) cols.push_back(j);
  }
  const size_t m = a.size(), k = cols.size();
  // Column-major copy, each column scaled to unit norm: the regressors span ten orders of magnitude
  // (one overhead against millions of attention pairs), which would swamp the rank test.
  std::vector<std::vector<double>> q(k, std::vector<double>(m));
  std::vector<double> scale(k);
  for (size_t c = 0; c < k; ++c) {
    double norm = 0;
    for (size_t i = 0; i < m; ++i) norm += a[i][cols[c]] * a[i][cols[c]];
    norm = std::sqrt(norm);
    if (norm == 0) return false;
    scale[c] = norm;
    for (size_t i = 0; i < m; ++i) q[c][i] = a[i][cols[c]] / norm;
  }
  std::vector<double> r = b;
  for (size_t c = 0; c < k; ++c) {
    double norm = 0;
    for (size_t i = c; i < m; ++i) norm += q[c][i] * q[c][i];
    norm = std::sqrt(norm);
    if (norm < 1e-7) return false;
    const double alpha = q[c][c] > 0 ? -norm : norm;
    std::vector<double> v(q[c].begin() + c, q[c].end());
    v[0] -= alpha;
    double vv = 0;
    for (double e : v) vv += e * e;
    if (vv == 0) continue;
    const auto reflect = [&](std::vector<double>& col) {
      double dot = 0;
      for (size_t i = c; i < m; ++i) dot += v[i - c] * col[i];
      const double f = 2 * dot / vv;
      for (size_t i = c; i < m; ++i) col[i] -= f * v[i - c];
    };
    for (size_t d = c; d < k; ++d) reflect(q[d]);
    reflect(r);
  }
  // Back substitution on R (upper triangle of q, column-major).
  std::vector<double> y(k);
  for (size_t c = k; c-- > 0;) {
    double sum = r[c];
    for (size_t d = c + 1; d < k; ++d) sum -= q[d][c] * y[d];
    y[c] = sum / q[c][c];
  }
  x.fill(0);
  for (size_t c = 0; c < k; ++c) x[cols[c]] = y[c] / scale[c];
  residual = 0;
  for (size_t i = 0; i < m; ++i) {
    double predicted = 0;
    for (size_t j = 0; j < kTerms; ++j) predicted += a[i][j] * x[j];
    residual += (predicted - b[i]) * (predicted - b[i]);
  }
  return true;
}

// TOML basic string: quotes, backslashes and control characters escaped.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

StepFeatures StepFeatures::of(std::span<const ProfileSlice> slices) {
  StepFeatures f;
  for (const ProfileSlice& s : slices) {
    const double start = s.start, tokens = s.tokens;
    f.tokens += tokens;
    f.sampled += s.sample ? 1 : 0;
    f.attention_pairs += tokens * (start + 0.5 * (tokens + 1));
    f.kv_tokens += start + tokens;
  }
  return f;
}

double CostCoefficients::predict(const StepFeatures& f) const {
  return overhead_s + per_token_s * f.tokens + per_sampled_token_s * f.sampled +
         per_attention_pair_s * f.attention_pairs + per_kv_token_s * f.kv_tokens;
}

std::vector<ProfileShape> profile_grid(bool quick, uint32_t max_model_len,
                                       uint64_t kv_capacity_tokens, uint32_t block_size,
                                       uint32_t deep_context) {
  std::vector<ProfileShape> grid;
  if (quick) {
    for (uint32_t t : {16u, 64u, 256u}) grid.push_back(prefill(0, t));
    grid.push_back(prefill(256, 64));
    grid.push_back(prefill(512, 128));
    for (uint32_t ctx : {64u, 512u}) {
      for (uint32_t b : {1u, 4u, 16u}) grid.push_back(decode(b, ctx));
    }
    grid.push_back(mixed(128, 0, 4, 256));
  } else {
    for (uint32_t t : {16u, 32u, 64u, 128u, 256u, 512u, 1024u, 2048u})
      grid.push_back(prefill(0, t));
    for (uint32_t start : {512u, 2048u, 4096u}) {
      for (uint32_t t : {32u, 256u, 1024u}) grid.push_back(prefill(start, t));
    }
    for (uint32_t ctx : {128u, 1024u, 4096u}) {
      for (uint32_t b : {1u, 2u, 4u, 8u, 16u, 32u}) grid.push_back(decode(b, ctx));
    }
    // What a chunked scheduler with a 512-token budget builds while decodes are running.
    grid.push_back(mixed(480, 0, 32, 512));
    grid.push_back(mixed(504, 1024, 8, 256));
    grid.push_back(mixed(496, 0, 16, 2048));
    grid.push_back(mixed(60, 0, 4, 128));
    for (uint64_t context = 8192; context < deep_context; context *= 2) {
      const auto c = static_cast<uint32_t>(context);
      for (uint32_t t : {32u, 256u, 1024u, 2048u}) grid.push_back(prefill(c, t));
      for (uint32_t b : {1u, 8u, 32u}) grid.push_back(decode(b, c));
    }
  }
  std::erase_if(grid, [&](const ProfileShape& shape) {
    for (const ProfileSlice& s : shape.slices) {
      if (static_cast<uint64_t>(s.start) + s.tokens > max_model_len) return true;
    }
    return blocks_of(shape, block_size) * block_size > kv_capacity_tokens;
  });
  return grid;
}

std::vector<ProfileMeasurement> profile_model(ModelInstance& model,
                                              std::span<const ProfileShape> shapes,
                                              const ProfileOptions& options) {
  if (shapes.empty()) {
    throw Error("profile: no step shape fits the model's max_model_len and KV capacity");
  }
  const hw_model_info& info = model.info();
  const uint32_t bs = options.block_size;
  uint64_t blocks = 0;
  size_t max_tokens = 0, max_slices = 0, max_blocks_per_slice = 0;
  for (const ProfileShape& shape : shapes) {
    blocks = std::max(blocks, blocks_of(shape, bs));
    size_t tokens = 0;
    for (const ProfileSlice& s : shape.slices) {
      tokens += s.tokens;
      max_blocks_per_slice = std::max<size_t>(max_blocks_per_slice, blocks_of(s, bs));
    }
    max_tokens = std::max(max_tokens, tokens);
    max_slices = std::max(max_slices, shape.slices.size());
  }
  if (blocks > UINT32_MAX) throw Error("profile: the shapes need more KV blocks than fit a uint32");
  model.init_kv(static_cast<uint32_t>(blocks), bs);

  // Buffers sized once for the largest shape so that the pointers in the slices stay valid.
  // Token ids only need to be valid ids: below 256 they are bytes of the built-in tokenizer.
  const uint32_t id_range = std::max(1u, std::min(info.vocab, 256u));
  std::vector<int32_t> ids(max_tokens);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % id_range);
  std::vector<uint32_t> tables(blocks);
  for (uint32_t i = 0; i < blocks; ++i) tables[i] = i;
  std::vector<hw_model_slice> slices(max_slices);
  GuardedBuffer<int32_t> sampled;  // a guard past the ids, as the engine's
  sampled.prepare(max_slices);
  std::vector<float> logits(info.returns_logits ? max_slices * static_cast<size_t>(info.vocab) : 0);

  std::vector<ProfileMeasurement> out;
  for (const ProfileShape& shape : shapes) {
    // Bump allocation: each slice takes the next blocks, so slices never share KV.
    size_t token_at = 0;
    uint32_t block_at = 0;
    for (size_t i = 0; i < shape.slices.size(); ++i) {
      const ProfileSlice& s = shape.slices[i];
      const auto count = static_cast<uint32_t>(blocks_of(s, bs));
      hw_model_slice& m = slices[i];
      m = hw_model_slice{};
      m.request_id = i + 1;
      m.start = s.start;
      m.tokens = s.tokens;
      m.token_ids = ids.data() + token_at;
      m.block_table = tables.data() + block_at;
      m.block_count = count;
      m.sample = s.sample ? 1 : 0;
      m.top_p = 1.0f;
      m.output_index = 0;
      token_at += s.tokens;
      block_at += count;
    }
    const hw_model_batch batch{sizeof(hw_model_batch), slices.data(),
                               static_cast<uint32_t>(shape.slices.size()), bs, nullptr};
    const uint32_t sampled_rows = static_cast<uint32_t>(std::count_if(
        shape.slices.begin(), shape.slices.end(), [](const auto& s) { return s.sample; }));
    const auto run_once = [&] {
      hw_model_output output{};
      output.struct_size = sizeof(hw_model_output);
      output.sampled = sampled.prepare(shape.slices.size());
      output.logits = logits.empty() ? nullptr : logits.data();
      output.logits_rows = logits.empty() ? 0 : sampled_rows;
      output.vocab = info.returns_logits ? info.vocab : 0;
      const auto t0 = std::chrono::steady_clock::now();
      model.forward(batch, output);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!sampled.guard_intact()) {
        throw PluginContractError(
            fmt::format("profile: shape '{}': model '{}' forward() wrote "
                        "hw_model_output.sampled[{}], past the batch's slices (one id per slice, "
                        "abi.h)",
                        shape.label, model.name(), sampled.capacity()),
            HW_INTERNAL);
      }
      return info.reports_duration ? output.seconds : wall;
    };
    // The warm-up grows the model's activation buffers and faults in the KV pages it touches.
    const double warm = run_once();
    const int reps = warm > options.slow_shape_s ? std::min(3, options.repetitions)
                                                 : std::max(1, options.repetitions);
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) times.push_back(run_once());
    ProfileMeasurement& m = out.emplace_back();
    m.shape = shape;
    m.features = StepFeatures::of(shape.slices);
    m.median_s = median(std::move(times));
    if (options.on_shape) options.on_shape(m);
  }
  return out;
}

CostFit fit_cost(std::span<ProfileMeasurement> measurements) {
  if (measurements.size() < kTerms) {
    throw Error(fmt::format("profile: {} measured shapes cannot fit {} coefficients",
                            measurements.size(), kTerms));
  }
  std::vector<Row> a;
  std::vector<double> b;
  for (const ProfileMeasurement& m : measurements) {
    if (!(m.median_s > 0)) {
      throw Error(fmt::format("profile: shape '{}' measured {} s; times must be > 0", m.shape.label,
                              m.median_s));
    }
    Row row = regressors(m.features);
    for (double& v : row) v /= m.median_s;
    a.push_back(row);
    b.push_back(1.0);
  }
  // Five terms: 32 subsets. The best non-negative unconstrained solution over all subsets is the
  // NNLS optimum (the KKT conditions hold on its active set), with no iteration to tune.
  Row best{};
  double best_residual = static_cast<double>(measurements.size());  // the all-zero solution
  for (unsigned mask = 1; mask < (1u << kTerms); ++mask) {
    Row x;
    double residual = 0;
    if (!solve_subset(a, b, mask, x, residual)) continue;
    if (std::any_of(x.begin(), x.end(), [](double v) { return v < 0; })) continue;
    if (residual < best_residual) {
      best_residual = residual;
      best = x;
    }
  }
  CostFit fit;
  fit.coefficients = {best[0], best[1], best[2], best[3], best[4]};
  std::vector<double> errors;
  for (ProfileMeasurement& m : measurements) {
    m.predicted_s = fit.coefficients.predict(m.features);
    errors.push_back(std::abs(m.predicted_s - m.median_s) / m.median_s);
  }
  fit.max_relative_error = *std::max_element(errors.begin(), errors.end());
  fit.median_relative_error = median(std::move(errors));
  return fit;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        const size_t begin = line.find_first_not_of(" \t", colon + 1);
        if (begin != std::string::npos) return line.substr(begin);
      }
    }
  }
  return "unknown";
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

void write_cost_file(const std::filesystem::path& file, const CostFit& fit,
                     std::span<const ProfileMeasurement> measurements, const hw_model_info& info,
                     const CostFileInfo& about) {
  std::string text = fmt::format(
      "# Step-time model of one engine, fitted by `headway profile` (docs/profiling.md). A sim\n"
      "# model reads it with options = {{ cost_file = \"<this file>\" }}.\n"
      "format = 1\n"
      "date = {}\n"
      "source = {}\n"
      "model_plugin = {}\n\n",
      quoted(about.date), quoted(about.source), quoted(about.model_name));
  if (info.reports_duration != 0) {
    // A simulated model's step times are its own arithmetic, the same on any machine.
    text += "# fitted from the step times a simulated model reports: no machine ran the steps\n\n";
  } else if (!about.from_step_trace) {
    text += fmt::format("[machine]\ncpu = {}\nthreads = {}\ncores = {}\n\n", quoted(about.cpu),
                        about.threads, about.cores);
  }
  const CostCoefficients& c = fit.coefficients;
  text += fmt::format(
      "# seconds = overhead_s + per_token_s * tokens + per_sampled_token_s * sampled\n"
      "#         + per_attention_pair_s * attention_pairs + per_kv_token_s * kv_tokens\n"
      "[coefficients]\n"
      "overhead_s = {:.6e}            # per step\n"
      "per_token_s = {:.6e}           # per position computed (linear layers)\n"
      "per_sampled_token_s = {:.6e}   # per sampled position (LM head)\n"
      "per_attention_pair_s = {:.6e}  # per causal (query, key) pair\n"
      "per_kv_token_s = {:.6e}        # per KV position read or written\n\n",
      c.overhead_s, c.per_token_s, c.per_sampled_token_s, c.per_attention_pair_s, c.per_kv_token_s);
  text += fmt::format(
      "[model]\nlayers = {}\nhidden = {}\nheads = {}\nkv_heads = {}\nhead_dim = {}\nvocab = {}\n"
      "max_model_len = {}\nkv_capacity_tokens = {}\nkv_bytes_per_token = {}\n\n",
      info.layers, info.hidden, info.heads, info.kv_heads, info.head_dim, info.vocab,
      info.max_model_len, info.kv_capacity_tokens, info.kv_bytes_per_token);
  text += fmt::format(
      "[fit]\nmethod = {}\nshapes = {}\nquick = {}\nmedian_relative_error = {:.4f}\n"
      "max_relative_error = {:.4f}\n\n",
      quoted(about.from_step_trace ? "step trace" : "grid"), measurements.size(), about.quick,
      fit.median_relative_error, fit.max_relative_error);
  if (!about.coverage.empty()) text += "# covered: " + about.coverage + "\n\n";
  // Every shape of a grid; of a trace's thousands of steps, those the fit misses most.
  constexpr size_t kListed = 100;
  std::vector<const ProfileMeasurement*> listed;
  for (const ProfileMeasurement& m : measurements) listed.push_back(&m);
  if (listed.size() > kListed) {
    const auto error = [](const ProfileMeasurement* m) {
      return std::abs(m->predicted_s - m->median_s) / m->median_s;
    };
    std::partial_sort(listed.begin(), listed.begin() + kListed, listed.end(),
                      [&](const auto* a, const auto* b) { return error(a) > error(b); });
    listed.resize(kListed);
    text += fmt::format("# the {} of {} {} with the largest errors:\n", kListed,
                        measurements.size(), about.from_step_trace ? "steps" : "shapes");
  }
  text += about.from_step_trace
              ? "# step (e engine, s step, r run)      measured ms  predicted ms   error\n"
              : "# shape                                measured ms  predicted ms   error\n";
  for (const ProfileMeasurement* p : listed) {
    const ProfileMeasurement& m = *p;
    text +=
        fmt::format("# {:<36} {:>12.3f} {:>13.3f} {:>+7.1f}%\n", m.shape.label, m.median_s * 1e3,
                    m.predicted_s * 1e3, 100 * (m.predicted_s - m.median_s) / m.median_s);
  }
  write_output_file(file, text, "the cost file");
}

}  // namespace headway::core
