#include "core/train/inspect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/io/run_file.hpp"
#include "core/train/longctx_io.hpp"
#include "core/train/prior_stats.hpp"
#include "core/train/run_io.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {
namespace {

// The last committed row of a column, its per-row shape in *shape.
std::vector<double> last_row(const io::RunReader& r, const std::string& table,
                             const std::string& col, std::vector<int64_t>* shape) {
  const std::vector<double> all = r.column(table, col, shape);
  const int64_t n = r.rows(table);
  if (n == 0) return {};
  const size_t per = all.size() / size_t(n);
  return std::vector<double>(all.end() - long(per), all.end());
}

bool has_column(const io::RunReader& r, const std::string& table, const std::string& col) {
  const auto c = r.columns(table);
  return std::find(c.begin(), c.end(), col) != c.end();
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void print_config(const io::RunReader& r, std::ostream& out, TrainConfig& cfg) {
  const auto prov = r.provenance();
  const auto get = [&](const char* k) {
    const auto it = prov.find(k);
    return it == prov.end() ? std::string("?") : it->second;
  };
  io::Checkpoint holder;
  holder.config_toml = r.config_toml();
  cfg = checkpoint_config(holder);
  out << fmt::format("run {}  ({})\n", cfg.run.name, r.path());
  out << fmt::format("  model      {} | {}\n", describe(cfg.model), get("precision"));
  out << fmt::format("  data       {}{}\n", cfg.data.source,
                     cfg.data.paths.empty() ? "" : " " + cfg.data.paths);
  out << fmt::format(
      "  training   {} steps x {} seq x {} tokens per DP rank | lr {} -> {} | "
      "warmup {}\n",
      cfg.train.steps, cfg.train.batch, cfg.train.seq_len, cfg.train.lr, cfg.train.min_lr,
      cfg.train.warmup);
  out << fmt::format("  grid       {} ranks = dp {} x cp {} ({})\n", get("world_size"), get("dp"),
                     get("cp"), layout_name(cfg.parallel.layout));
  out << fmt::format("  provenance lcr {} ({}), started {}, {}, resumed {} times\n",
                     get("lcr_version"), get("git_revision"), get("start_time"), get("devices"),
                     prov.count("resume_count") ? prov.at("resume_count") : "0");
}

void print_metrics(const io::RunReader& r, std::ostream& out) {
  const int64_t n = r.rows("metrics");
  out << fmt::format("\nmetrics: {} rows\n", n);
  if (n == 0) return;
  const auto steps = r.steps("metrics");
  const auto loss = r.column("metrics", "loss");
  const auto mn = std::min_element(loss.begin(), loss.end()) - loss.begin();
  out << fmt::format(
      "  loss  first {:.4f} (step {})  min {:.4f} (step {})  last {:.4f} (step {})\n", loss.front(),
      steps.front(), loss[size_t(mn)], steps[size_t(mn)], loss.back(), steps.back());
  out << "  curve";
  const int64_t pts = std::min<int64_t>(n, 8);
  for (int64_t k = 0; k < pts; ++k) {
    const size_t i = pts == 1 ? 0 : size_t(k * (n - 1) / (pts - 1));
    out << fmt::format("  {}:{:.3f}", steps[i], loss[i]);
  }
  out << "\n";
  const auto col = [&](const char* c) { return r.column("metrics", c).back(); };
  out << fmt::format("  last  step {} | lr {:.3e} | grad_norm {:.3f} | {:.0f} tok/s | {:.1f} MiB\n",
                     steps.back(), col("lr"), col("grad_norm"), col("tokens_per_s"),
                     col("memory_bytes") / 1048576.0);
}

void print_eval(const io::RunReader& r, std::ostream& out) {
  const auto tables = r.tables();
  const auto has = [&](const char* t) {
    return std::find(tables.begin(), tables.end(), t) != tables.end() && r.rows(t) > 0;
  };
  if (!has("eval/perplexity")) {
    out << "\nevaluation: none yet\n";
    return;
  }
  const auto steps = r.steps("eval/perplexity");
  const int64_t last = steps.back();
  out << fmt::format("\nevaluation at step {}\n", last);
  const auto len = r.column("eval/perplexity", "length");
  const auto loss = r.column("eval/perplexity", "loss");
  const auto ppl = r.column("eval/perplexity", "ppl");
  // Task accuracy of the same evaluation, by length (eval/task rows of step `last`).
  std::map<int64_t, double> acc;
  if (has("eval/task")) {
    const auto ts = r.steps("eval/task");
    const auto tl = r.column("eval/task", "length");
    const auto ta = r.column("eval/task", "token_accuracy");
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i] == last) acc[int64_t(tl[i])] = ta[i];
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i] != last) continue;
    const int64_t n = int64_t(len[i]);
    out << fmt::format("  length {:>6}  loss {:.4f}  ppl {:9.3f}", n, loss[i], ppl[i]);
    if (acc.count(n)) out << fmt::format("  accuracy {:.3f}", acc.at(n));
    out << "\n";
  }
  if (has("eval/passkey")) {
    const auto ps = r.steps("eval/passkey");
    const auto pl = r.column("eval/passkey", "length");
    const auto pa = r.column("eval/passkey", "accuracy");
    std::map<int64_t, std::pair<double, int>> by_len;
    for (size_t i = 0; i < ps.size(); ++i)
      if (ps[i] == ps.back()) {
        by_len[int64_t(pl[i])].first += pa[i];
        by_len[int64_t(pl[i])].second += 1;
      }
    out << fmt::format("  passkey (step {}):", ps.back());
    for (const auto& [l, s] : by_len) out << fmt::format("  L={} {:.2f}", l, s.first / s.second);
    out << "\n";
  }
}

// The long-context tables of the newest evaluation that wrote eval/longctx rows.
void print_longctx(const io::RunReader& r, const TrainConfig& cfg, std::ostream& out) {
  int64_t step = 0;
  const std::vector<LongRow> rows = read_longctx_rows(r, -1, &step);
  if (rows.empty()) return;
  out << fmt::format("  long-context tasks (step {}, {} cells)\n", step, rows.size());
  out << format_longctx(summarize_longctx(rows, cfg.eval.longctx_threshold), "  ");
}

void print_priors(const io::RunReader& r, const TrainConfig& cfg, std::ostream& out) {
  const AttentionSpec& a = cfg.model.attention;
  const int H = a.heads, group = a.heads / a.kv_heads;
  for (int l = 0; l < cfg.model.n_layers; ++l) {
    const std::string t = "priors/layer_" + std::to_string(l);
    if (r.rows(t) == 0) continue;
    std::vector<int64_t> shp;
    const auto ent = last_row(r, t, "entropy", &shp);
    const auto mxl = last_row(r, t, "max_logit", &shp);
    const auto ftm = last_row(r, t, "first_token_mass", &shp);
    out << fmt::format("\nlayer {} (priors at step {})\n", l, r.steps(t).back());
    std::string head = "  head  entropy  max_logit  first_tok";
    // GOAT's u column is there for every R; the per-mode columns only for R > 0.
    const bool goat = has_column(r, t, "u"), pope = has_column(r, t, "q_usage"),
               rope = has_column(r, t, "q_pair_norm"), path = has_column(r, t, "beta_stats");
    if (goat) head += "  top_mode  amplitude  |b|/|a|  peak_lag  peak-median  u0_bump";
    if (pope) head += "  q_usage  k_usage  top_freq  delta";
    if (rope) head += "  q_norm  top_pair  centroid";
    if (path) head += "  beta_mean  beta_std  beta_min  beta_max";  // of the head's KV head
    out << head << "\n";
    std::vector<double> amp, ratio, curve, u, qu, ku, dl, qn;
    std::vector<int64_t> cs, us, qs;
    // The curves' axes (/priors/goat_lags, /priors/goat_positions) are prior_lags() of the
    // longest evaluation length, recomputed here from the config that wrote them.
    const std::vector<int64_t> lags = prior_lags(cfg.train.seq_len * cfg.eval.max_length_factor);
    const bool modes = has_column(r, t, "amplitude");
    if (goat) {
      if (modes) {
        amp = last_row(r, t, "amplitude", &shp);
        ratio = last_row(r, t, "beta_alpha_ratio", &shp);
      }
      curve = last_row(r, t, "prior_curve", &cs);
      u = last_row(r, t, "u", &us);
    }
    if (pope) {
      qu = last_row(r, t, "q_usage", &qs);
      ku = last_row(r, t, "k_usage", &shp);
      dl = last_row(r, t, "delta", &shp);
    }
    if (rope) qn = last_row(r, t, "q_pair_norm", &qs);
    const std::vector<double> bs =
        path ? last_row(r, t, "beta_stats", &shp) : std::vector<double>{};
    for (int h = 0; h < H; ++h) {
      std::string line = fmt::format("  {:>4}  {:7.3f}  {:9.3f}  {:9.3f}", h, ent[size_t(h)],
                                     mxl[size_t(h)], ftm[size_t(h)]);
      const int hk = h / group;
      if (goat) {
        const int R = a.goat.modes;
        int top = 0;
        for (int m = 1; m < R; ++m)
          if (amp[size_t(h * R + m)] > amp[size_t(h * R + top)]) top = m;
        // Peak of the relative prior over lags inside the training length (axis = lag index).
        const int64_t nl = cs.back();
        std::vector<double> inside;
        int64_t peak = 0;
        for (int64_t i = 0; i < nl; ++i) {
          if (lags[size_t(i)] >= cfg.train.seq_len) break;
          inside.push_back(curve[size_t(h * nl + i)]);
          if (curve[size_t(h * nl + i)] > curve[size_t(h * nl + peak)]) peak = i;
        }
        const int64_t np = us.back();
        double rest = 0;
        int cnt = 0;
        for (int64_t j = 1; j < std::min<int64_t>(np, 32); ++j, ++cnt)
          rest += u[size_t(hk * np + j)];
        const double bump = u[size_t(hk * np)] - (cnt ? rest / cnt : 0.0);
        if (modes)
          line +=
              fmt::format("  {:>8}  {:9.3f}  {:7.2f}  {:>8}  {:11.3f}  {:7.3f}", top,
                          amp[size_t(h * R + top)], ratio[size_t(h * R + top)], lags[size_t(peak)],
                          curve[size_t(h * nl + peak)] - median(inside), bump);
        else  // no relative prior (R = 0): only the key prior's first-token bump
          line += fmt::format("  {:>8}  {:>9}  {:>7}  {:>8}  {:>11}  {:7.3f}", "-", "-", "-", "-",
                              "-", bump);
      }
      if (pope) {
        const int64_t d = qs.back();
        double mq = 0, mk = 0, md = 0;
        int64_t top = 0;
        for (int64_t c = 0; c < d; ++c) {
          mq += qu[size_t(h * d + c)];
          mk += ku[size_t(hk * d + c)];
          md += dl[size_t(hk * d + c)];
          if (qu[size_t(h * d + c)] > qu[size_t(h * d + top)]) top = c;
        }
        line += fmt::format("  {:7.3f}  {:7.3f}  {:>8}  {:5.2f}", mq / d, mk / d, top, md / d);
      }
      if (rope) {
        const int64_t P = qs.back();
        double s = 0, w = 0;
        int64_t top = 0;
        for (int64_t m = 0; m < P; ++m) {
          const double x = qn[size_t(h * P + m)];
          s += x;
          w += x * double(m);
          if (x > qn[size_t(h * P + top)]) top = m;
        }
        line += fmt::format("  {:6.3f}  {:>8}  {:8.2f}", s / P, top, s > 0 ? w / s : 0.0);
      }
      if (path)
        line += fmt::format("  {:9.3f}  {:8.3f}  {:8.3f}  {:8.3f}", bs[size_t(hk * 4)],
                            bs[size_t(hk * 4 + 1)], bs[size_t(hk * 4 + 2)], bs[size_t(hk * 4 + 3)]);
      out << line << "\n";
    }
  }
}

}  // namespace

std::string run_file_path(const std::string& p) {
  return std::filesystem::is_directory(p) ? p + "/run.h5" : p;
}

void inspect_run(const std::string& run_or_file, std::ostream& out) {
  const std::string path = run_file_path(run_or_file);
  require(std::filesystem::exists(path), path, " does not exist (pass runs/<name> or a run.h5)");
  io::RunReader r = io::RunReader::open(path);
  TrainConfig cfg;
  print_config(r, out, cfg);
  print_metrics(r, out);
  print_eval(r, out);
  print_longctx(r, cfg, out);
  print_priors(r, cfg, out);
}

}  // namespace lcr::train
