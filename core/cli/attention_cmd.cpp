#include "core/cli/attention_cmd.hpp"

#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "core/cli/attention_io.hpp"
#include "core/cli/verbs.hpp"
#include "core/config/attention_config.hpp"
#include "core/io/hdf5.hpp"
#include "core/io/output_path.hpp"
#include "kernels/attention/attention.hpp"

#ifndef LCR_VERSION
#define LCR_VERSION "unknown"
#endif

namespace lcr::cli {
namespace {

// Sizes the input datasets define: q [B, Lq, H, dq], k [B, Lk, Hkv, dq], v [B, Lk, Hkv, dv].
struct Shapes {
  int64_t B, Lq, Lk, H, Hkv, dq, dv;
};

Shapes read_shapes(const h5::File& f) {
  Shapes s{};
  const auto q = f.shape("q", {-1, -1, -1, -1});
  s.B = q[0], s.Lq = q[1], s.H = q[2], s.dq = q[3];
  // Refused, not computed: an empty batch has no outputs to write (and the ring would
  // split nothing across its ranks).
  require(s.B > 0, f.file(), ": dataset /q has batch size B = 0 (shape ", shape_string(q),
          "): nothing to compute; give at least one sequence");
  const auto k = f.shape("k", {s.B, -1, -1, s.dq});
  s.Lk = k[1], s.Hkv = k[2];
  s.dv = f.shape("v", {s.B, s.Lk, s.Hkv, -1})[3];
  return s;
}

// defaults < the input's /spec attributes < --config < overrides; then the sizes from the
// datasets, which a stated heads / kv_heads / head_dim / value_dim must agree with.
AttentionSpec resolve_spec(const h5::File& f, const AttentionCommand& cmd, const Shapes& s) {
  config::Document root;
  if (f.has_group("spec")) {
    const auto g = f.group("spec");
    std::vector<std::pair<std::string, config::Value>> values;
    for (const auto& n : g.attr_names()) values.emplace_back("attention." + n, g.attr(n));
    config::Document t;
    try {
      t = config::table_from_values(values);
      config::attention_spec_from(t);  // reject bad names/types here, where we know the source
    } catch (const Error& e) {
      throw_error(f.file(), ": /spec attributes: ", e.what());
    }
    config::merge(root, std::move(t));
  }
  config::merge(root, config::load_config(cmd.config, cmd.overrides));
  AttentionSpec spec = config::attention_spec_from(root);

  auto stated = [&](const char* key) { return root.has(std::string("attention.") + key); };
  auto agree = [&](const char* key, int64_t have, int64_t from_data, const std::string& why) {
    require(!stated(key) || have == from_data, "attention.", key, " = ", have, " disagrees with ",
            f.file(), ": ", why, " (sizes come from the datasets; drop the key or fix the data)");
  };
  const std::string qs = "dataset /q has shape " + shape_string({s.B, s.Lq, s.H, s.dq});
  agree("heads", spec.heads, s.H, qs);
  agree("kv_heads", spec.kv_heads, s.Hkv,
        "dataset /k has " + std::to_string(s.Hkv) + " heads (dimension 2)");
  spec.heads = int(s.H);
  spec.kv_heads = int(s.Hkv);
  if (stated("head_dim")) {
    require(input_qk_dim(spec) == s.dq, "attention.head_dim = ", spec.head_dim,
            " means q and k of width ", input_qk_dim(spec), " for scheme '",
            scheme_name(spec.scheme), "', but ", qs);
  } else {  // the kernel width whose content width is dq (GOAT adds its 2R + 2 prior lanes)
    spec.head_dim = int(s.dq);
    spec.head_dim = int(s.dq + (s.dq - input_qk_dim(spec)));
  }
  agree("value_dim", spec.v_dim(), s.dv, "dataset /v has width " + std::to_string(s.dv));
  spec.value_dim = int(s.dv);
  return spec;
}

template <class T>
void check_finite(const h5::Location& loc, const std::string& name, const T* x,
                  const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (auto e : shape) n *= size_t(e);
  for (size_t i = 0; i < n; ++i) {
    if (std::isfinite(x[i])) continue;
    std::vector<int64_t> idx(shape.size());
    for (size_t r = shape.size(), rest = i; r-- > 0; rest /= size_t(shape[r]))
      idx[r] = int64_t(rest % size_t(shape[r]));
    throw_error(loc.file(), ": dataset ", loc.child_path(name), " has ",
                std::isnan(x[i]) ? "NaN" : (x[i] > 0 ? "+Inf" : "-Inf"), " at index ",
                shape_string(idx), "; every input must be finite");
  }
}

template <class V>
V read_input(const h5::Location& loc, const std::string& name, const std::vector<int64_t>& expect) {
  V v = h5::read_view<V>(loc, name, expect);
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  check_finite(loc, name, h.data(), shape_of(h));
  return v;
}

std::string describe(const ParamLayout& l) {
  std::string s;
  for (const auto& e : l.entries())
    s += (s.empty() ? "" : ", ") + e.name + " " + shape_string(e.shape);
  return s.empty() ? "none" : s;
}

// /params/<name> for every entry of the spec's parameter layout, and nothing else.
template <class T>
ParamSet<T> read_params(const h5::File& f, const AttentionSpec& spec) {
  ParamSet<T> p(attention_param_layout(spec), "params");
  const std::string want = "scheme '" + std::string(scheme_name(spec.scheme)) +
                           "' with these options takes: " + describe(p.layout);
  if (!f.has_group("params")) {
    require(p.layout.entries().empty(), f.file(), ": missing group /params; ", want);
    return p;
  }
  const auto g = f.group("params");
  for (const auto& n : g.children())
    require(p.has(n), f.file(), ": /params/", n, " is not a parameter; ", want);
  auto h = Kokkos::create_mirror_view(p.data);
  for (const auto& e : p.layout.entries()) {
    const std::vector<T> x = g.read<T>(e.name, e.shape);
    check_finite(g, e.name, x.data(), e.shape);
    std::copy(x.begin(), x.end(), h.data() + e.offset);
  }
  Kokkos::deep_copy(p.data, h);
  return p;
}

template <class T>
void write_params(const h5::Location& g, const ParamSet<T>& p) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), p.data);
  for (const auto& e : p.layout.entries()) g.write(e.name, h.data() + e.offset, e.shape);
}

// Everything goes to <output>.tmp, which is renamed to <output> only once complete.
template <class T>
void write_output(const AttentionCommand& cmd, const AttentionSpec& spec,
                  const AttentionInputs<T>& in, const AttentionOutputs<T>& out,
                  const AttentionGrads<T>* g) {
  const std::string tmp = cmd.output + ".tmp";
  io::check_tmp_path(tmp);  // never delete what lcr did not create
  bool created = false;
  try {
    h5::File f = h5::File::create(tmp);
    created = true;
    h5::write_view(f, "o", out.o);
    h5::write_view(f, "lse", out.lse);
    if (g) {
      h5::write_view(f, "dq", g->dq);
      h5::write_view(f, "dk", g->dk);
      h5::write_view(f, "dv", g->dv);
      if (g->dfox_cq.extent(0) > 0) h5::write_view(f, "dfox_cq", g->dfox_cq);
      if (g->dfox_ck.extent(0) > 0) h5::write_view(f, "dfox_ck", g->dfox_ck);
      if (g->dpath_w.extent(0) > 0) h5::write_view(f, "dpath_w", g->dpath_w);
      if (g->dpath_beta.extent(0) > 0) h5::write_view(f, "dpath_beta", g->dpath_beta);
      if (!g->dparams.layout.entries().empty()) write_params(f.create_group("dparams"), g->dparams);
    }
    f.set_attr("q_pos0", in.q_pos0);
    f.set_attr("k_pos0", in.k_pos0);
    f.set_attr("precision", cmd.precision);
    f.set_attr("input", cmd.input);
    f.set_attr("lcr_version", std::string(LCR_VERSION));
    const auto sg = f.create_group("spec");
    for (const auto& [k, v] : config::attention_spec_values(spec)) sg.set_attr(k, v);
    f.close();
    std::error_code ec;
    std::filesystem::rename(tmp, cmd.output, ec);
    require(!ec, cmd.output, ": cannot move ", tmp, " into place: ", ec.message());
  } catch (...) {
    std::error_code ec;
    if (created) std::filesystem::remove(tmp, ec);
    throw;
  }
}

int64_t position_attr(const h5::File& f, const char* name) {
  if (!f.has_attr(name)) return 0;
  const auto a = f.attr(name);
  const auto* v = std::get_if<int64_t>(&a);
  require(v && *v >= 0, f.file(), ": attribute ", name, " must be an integer >= 0");
  return *v;
}

// The inputs, parameters and dout of the file (attention_io.hpp), validated.
template <class T>
AttentionProblem<T> read_problem(const h5::File& f, const AttentionSpec& spec, const Shapes& s) {
  const int64_t B = s.B, Lq = s.Lq, Lk = s.Lk, H = s.H;
  AttentionProblem<T> pr;
  pr.spec = spec;
  AttentionInputs<T>& in = pr.in;
  in.q = read_input<View4<T>>(f, "q", {B, Lq, H, s.dq});
  in.k = read_input<View4<T>>(f, "k", {B, Lk, s.Hkv, s.dq});
  in.v = read_input<View4<T>>(f, "v", {B, Lk, s.Hkv, s.dv});
  in.q_pos0 = position_attr(f, "q_pos0");
  in.k_pos0 = position_attr(f, "k_pos0");
  // Positions are int64 inside the kernels: the last one must fit (2^63 - 5 + Lq wrapped).
  require(in.q_pos0 <= INT64_MAX - Lq && in.k_pos0 <= INT64_MAX - Lk, f.file(),
          ": positions overflow int64: q_pos0 + Lq = ", in.q_pos0, " + ", Lq,
          ", k_pos0 + Lk = ", in.k_pos0, " + ", Lk, " (at most ", INT64_MAX, ")");
  // Scheme-specific inputs are optional named datasets, read when present; check_inputs
  // rejects any the scheme does not take.
  if (uses_fox(spec.scheme))
    require(f.has_dataset("fox_cq") && f.has_dataset("fox_ck"), f.file(), ": scheme '",
            scheme_name(spec.scheme), "' needs datasets /fox_cq [B, Lq, H] and /fox_ck [B, Lk, H]",
            " (cumulative log forget gates at global positions)");
  if (is_path(spec.scheme))
    require(f.has_dataset("path_w") && f.has_dataset("path_beta"), f.file(), ": scheme '",
            scheme_name(spec.scheme), "' needs datasets /path_w [B, L, Hkv, head_dim] and ",
            "/path_beta [B, L, Hkv] (Householder directions and strengths)");
  if (f.has_dataset("fox_cq")) in.fox_cq = read_input<View3<T>>(f, "fox_cq", {B, Lq, H});
  if (f.has_dataset("fox_ck")) in.fox_ck = read_input<View3<T>>(f, "fox_ck", {B, Lk, H});
  if (f.has_dataset("path_w")) in.path_w = read_input<View4<T>>(f, "path_w", {B, Lk, s.Hkv, -1});
  if (f.has_dataset("path_beta"))
    in.path_beta = read_input<View3<T>>(f, "path_beta", {B, Lk, s.Hkv});
  pr.params = read_params<T>(f, spec);
  const ParamSet<T>& params = pr.params;
  const std::set<std::string> known{"q",      "k",      "v",         "dout",   "fox_cq",
                                    "fox_ck", "path_w", "path_beta", "params", "spec"};
  for (const auto& n : f.children())
    if (!known.count(n)) spdlog::warn("{}: ignoring /{} (not an attention input)", f.file(), n);
  try {
    check_inputs(spec, in, params);
  } catch (const Error& e) {
    throw_error(f.file(), ": ", e.what());
  }
  if (f.has_dataset("dout")) pr.dout = read_input<View4<T>>(f, "dout", {B, Lq, H, s.dv});
  return pr;
}

template <class T>
void run_typed(const AttentionCommand& cmd, const h5::File& f, const AttentionSpec& spec,
               const Shapes& s) {
  const int64_t B = s.B, Lq = s.Lq, Lk = s.Lk, H = s.H;
  const AttentionProblem<T> pr = read_problem<T>(f, spec, s);
  const AttentionInputs<T>& in = pr.in;
  const ParamSet<T>& params = pr.params;
  spdlog::info("attention: scheme {}, B={} Lq={} Lk={} H={} Hkv={} dq={} dv={}, {}",
               scheme_name(spec.scheme), B, Lq, Lk, H, s.Hkv, s.dq, s.dv, cmd.precision);
  const auto out = make_outputs<T>(spec, in);
  Kokkos::Timer timer;
  attention_forward<T>(spec, in, params, out);
  Kokkos::fence();
  spdlog::info("forward: {:.1f} ms", 1e3 * timer.seconds());
  if (!pr.has_dout()) {
    write_output<T>(cmd, spec, in, out, nullptr);
    spdlog::info("wrote {} (o, lse; no /dout, so no gradients)", cmd.output);
    return;
  }
  const View4<const T> dout = pr.dout;
  auto g = make_grads<T>(spec, in);
  timer.reset();
  attention_backward<T>(spec, in, params, out, dout, g);
  Kokkos::fence();
  spdlog::info("backward: {:.1f} ms", 1e3 * timer.seconds());
  write_output<T>(cmd, spec, in, out, &g);
  spdlog::info("wrote {} (o, lse and the gradients of every input)", cmd.output);
}

}  // namespace

void check_attention_command(const AttentionCommand& cmd) {
  require(cmd.precision == "float64" || cmd.precision == "float32", "--precision must be ",
          "float64 or float32, got '", cmd.precision, "'");
  io::check_output_path(cmd.output, {cmd.input});  // compares files, not names
}

template <class T>
AttentionProblem<T> read_attention_problem(const AttentionCommand& cmd) {
  check_attention_command(cmd);
  const h5::File f = h5::File::open(cmd.input);
  const Shapes s = read_shapes(f);
  return read_problem<T>(f, resolve_spec(f, cmd, s), s);
}

template <class T>
void write_attention_result(const AttentionCommand& cmd, const AttentionSpec& spec,
                            const AttentionInputs<T>& in, const AttentionOutputs<T>& out,
                            const AttentionGrads<T>* g) {
  write_output<T>(cmd, spec, in, out, g);
}

#define LCR_INSTANTIATE(T)                                                                       \
  template AttentionProblem<T> read_attention_problem<T>(const AttentionCommand&);               \
  template void write_attention_result<T>(const AttentionCommand&, const AttentionSpec&,         \
                                          const AttentionInputs<T>&, const AttentionOutputs<T>&, \
                                          const AttentionGrads<T>*);
LCR_INSTANTIATE(float)
LCR_INSTANTIATE(double)
#undef LCR_INSTANTIATE

AttentionSpec run_attention(const AttentionCommand& cmd) {
  check_attention_command(cmd);
  const h5::File f = h5::File::open(cmd.input);
  const Shapes s = read_shapes(f);
  const AttentionSpec spec = resolve_spec(f, cmd, s);
  spdlog::debug("resolved spec:\n{}", config::attention_spec_toml(spec));
  if (cmd.precision == "float64")
    run_typed<double>(cmd, f, spec, s);
  else
    run_typed<float>(cmd, f, spec, s);
  return spec;
}

void add_attention_verb(CLI::App& app, Runner& run) {
  auto cmd = std::make_shared<AttentionCommand>();
  CLI::App* sub = app.add_subcommand(
      "attention",
      "Run attention on q, k, v from an HDF5 file; write o, lse (and, given /dout, every "
      "gradient) to another. Layout: docs/attention-file.md");
  sub->add_option("-i,--input", cmd->input, "input HDF5 file")->required();
  sub->add_option("-o,--output", cmd->output, "output HDF5 file (replaced atomically)")->required();
  sub->add_option("-p,--precision", cmd->precision, "compute and output precision")
      ->check(CLI::IsMember({"float64", "float32"}))
      ->capture_default_str();
  sub->add_option("-c,--config", cmd->config, "TOML file with an [attention] table")
      ->check(CLI::ExistingFile);
  sub->add_option("overrides", cmd->overrides,
                  "config overrides, e.g. attention.scheme=rope attention.rope.base=500000");
  sub->callback([cmd, &run] {
    run = [cmd] {
      run_attention(*cmd);
      return 0;
    };
  });
}

}  // namespace lcr::cli
