// `lcr attention` end to end, in-process: write an input file, run the command, compare
// the output file with attention_forward/backward called directly on the same tensors.
// Same code on the same inputs, so the results agree to rounding of the (deterministic)
// kernel; the 1e-13 slack only allows for a backend that reorders sums.
// Malformed inputs must fail with an Error that names the file and the dataset, and
// leave no output behind.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/cli/attention_cmd.hpp"
#include "core/io/hdf5.hpp"
#include "kernels/attention/attention.hpp"

namespace lcr::cli {
namespace {

namespace fs = std::filesystem;
template <class T>
using H3 = View3<T, HostSpace>;
template <class T>
using H4 = View4<T, HostSpace>;

// Random float64 inputs for `spec` (heads and widths as the spec says).
struct Data {
  AttentionSpec spec;
  H4<double> q, k, v, dout;
  H3<double> fox_cq, fox_ck;
  ParamSet<double, HostSpace> params;
  int64_t q_pos0 = 0, k_pos0 = 0;
};

template <class V>
void fill(const V& v, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> n01;
  for (size_t i = 0; i < v.span(); ++i) v.data()[i] = scale * n01(rng);
}

Data make_data(const AttentionSpec& s, int B, int Lq, int Lk, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  const int dq = input_qk_dim(s);
  Data d{s,
         H4<double>("q", B, Lq, s.heads, dq),
         H4<double>("k", B, Lk, s.kv_heads, dq),
         H4<double>("v", B, Lk, s.kv_heads, s.v_dim()),
         H4<double>("dout", B, Lq, s.heads, s.v_dim()),
         {},
         {},
         ParamSet<double, HostSpace>(attention_param_layout(s))};
  for (auto* x : {&d.q, &d.k, &d.v, &d.dout}) fill(*x, rng);
  fill(d.params.data, rng, 0.5);
  if (uses_fox(s.scheme)) {
    d.fox_cq = H3<double>("fox_cq", B, Lq, s.heads);
    d.fox_ck = H3<double>("fox_ck", B, Lk, s.heads);
    fill(d.fox_cq, rng, 0.3);
    fill(d.fox_ck, rng, 0.3);
  }
  return d;
}

// Writes d in the documented layout; `dout` and `params` can be left out.
void write_input(const std::string& path, const Data& d, bool dout = true, bool params = true) {
  h5::File f = h5::File::create(path);
  h5::write_view(f, "q", d.q);
  h5::write_view(f, "k", d.k);
  h5::write_view(f, "v", d.v);
  if (dout) h5::write_view(f, "dout", d.dout);
  if (d.fox_cq.extent(0) > 0) h5::write_view(f, "fox_cq", d.fox_cq);
  if (d.fox_ck.extent(0) > 0) h5::write_view(f, "fox_ck", d.fox_ck);
  if (params && !d.params.layout.entries().empty()) {
    const auto g = f.create_group("params");
    for (const auto& e : d.params.layout.entries())
      g.write(e.name, d.params.data.data() + e.offset, e.shape);
  }
  if (d.q_pos0) f.set_attr("q_pos0", d.q_pos0);
  if (d.k_pos0) f.set_attr("k_pos0", d.k_pos0);
  f.close();
}

std::vector<double> flat(const View4<double>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.span());
}
std::vector<double> flat(const View3<double>& v) {
  auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.span());
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) m = std::max(m, std::abs(got[i] - want[i]));
  EXPECT_LE(m, tol) << what;
}

class AttentionCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);  // the command's progress lines
    dir = fs::temp_directory_path() /
          ("lcr_attention_cmd_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    cmd.input = (dir / "in.h5").string();
    cmd.output = (dir / "out.h5").string();
  }
  void TearDown() override { fs::remove_all(dir); }

  // Runs the command on d and checks every output against the API on the same tensors.
  void run_and_compare(const Data& d, bool backward, double tol = 1e-13) {
    const AttentionSpec spec = run_attention(cmd);
    EXPECT_FALSE(fs::exists(cmd.output + ".tmp"));
    const auto& s = d.spec;
    AttentionInputs<double> in;
    in.q = Kokkos::create_mirror_view_and_copy(MemSpace(), d.q);
    in.k = Kokkos::create_mirror_view_and_copy(MemSpace(), d.k);
    in.v = Kokkos::create_mirror_view_and_copy(MemSpace(), d.v);
    in.q_pos0 = d.q_pos0, in.k_pos0 = d.k_pos0;
    if (d.fox_cq.extent(0)) in.fox_cq = Kokkos::create_mirror_view_and_copy(MemSpace(), d.fox_cq);
    if (d.fox_ck.extent(0)) in.fox_ck = Kokkos::create_mirror_view_and_copy(MemSpace(), d.fox_ck);
    ParamSet<double> params(d.params.layout);
    Kokkos::deep_copy(params.data, d.params.data);
    const auto out = make_outputs<double>(s, in);
    attention_forward<double>(s, in, params, out);

    const h5::File f = h5::File::open(cmd.output);
    const auto sg = f.group("spec");
    EXPECT_EQ(std::get<std::string>(sg.attr("scheme")), scheme_name(s.scheme));
    EXPECT_EQ(std::get<int64_t>(sg.attr("heads")), s.heads);
    EXPECT_EQ(std::get<int64_t>(sg.attr("kv_heads")), s.kv_heads);
    EXPECT_EQ(std::get<int64_t>(sg.attr("head_dim")), s.head_dim);
    EXPECT_EQ(spec.head_dim, s.head_dim);
    EXPECT_EQ(std::get<int64_t>(f.attr("q_pos0")), d.q_pos0);
    expect_near(f.read<double>("o", shape_of(out.o)), flat(out.o), tol, "o");
    expect_near(f.read<double>("lse", shape_of(out.lse)), flat(out.lse), tol, "lse");
    EXPECT_EQ(f.has_dataset("dq"), backward);
    if (!backward) return;
    auto g = make_grads<double>(s, in);
    attention_backward<double>(s, in, params, out,
                               Kokkos::create_mirror_view_and_copy(MemSpace(), d.dout), g);
    expect_near(f.read<double>("dq", shape_of(g.dq)), flat(g.dq), tol, "dq");
    expect_near(f.read<double>("dk", shape_of(g.dk)), flat(g.dk), tol, "dk");
    expect_near(f.read<double>("dv", shape_of(g.dv)), flat(g.dv), tol, "dv");
    if (g.dfox_cq.extent(0)) {
      expect_near(f.read<double>("dfox_cq"), flat(g.dfox_cq), tol, "dfox_cq");
      expect_near(f.read<double>("dfox_ck"), flat(g.dfox_ck), tol, "dfox_ck");
    }
    auto dp = Kokkos::create_mirror_view_and_copy(HostSpace(), g.dparams.data);
    for (const auto& e : g.dparams.layout.entries()) {
      const auto got = f.group("dparams").read<double>(e.name, e.shape);
      expect_near(got, std::vector<double>(dp.data() + e.offset, dp.data() + e.offset + e.size()),
                  tol, "dparams/" + e.name);
    }
  }

  // The Error message of the command, asserting it left no output behind.
  std::string error() {
    std::string m;
    try {
      run_attention(cmd);
    } catch (const Error& e) {
      m = e.what();
    }
    EXPECT_FALSE(fs::exists(cmd.output));
    EXPECT_FALSE(fs::exists(cmd.output + ".tmp"));
    return m;
  }

  fs::path dir;
  AttentionCommand cmd;
};

AttentionSpec spec_of(Scheme scheme, int H, int Hkv, int d) {
  AttentionSpec s;
  s.scheme = scheme;
  s.heads = H;
  s.kv_heads = Hkv;
  s.head_dim = d;
  return s;
}

TEST_F(AttentionCommandTest, NopeGqaForwardAndBackwardMatchTheApi) {
  const Data d = make_data(spec_of(Scheme::NoPE, 4, 2, 16), 2, 7, 7);
  write_input(cmd.input, d);
  std::ofstream(cmd.output) << "an older result";  // replaced, not appended to
  run_and_compare(d, true);
}

TEST_F(AttentionCommandTest, ForwardOnlyWithoutDout) {
  const Data d = make_data(spec_of(Scheme::ALiBi, 2, 1, 8), 1, 129, 129);
  write_input(cmd.input, d, /*dout=*/false);
  cmd.overrides = {"attention.scheme=alibi"};
  run_and_compare(d, false);
}

TEST_F(AttentionCommandTest, FoxWithOffsetsSinkAndSpecFromTheFile) {
  AttentionSpec s = spec_of(Scheme::FoX, 2, 2, 8);
  s.numerics.sink = true;  // a learned parameter: /params/sink [H]
  Data d = make_data(s, 1, 5, 9);
  d.q_pos0 = 4;  // queries are global positions 4..8 of the 9 keys
  write_input(cmd.input, d);
  {  // the scheme comes from the file's /spec attributes, the sink from an override
    h5::File f = h5::File::open(cmd.input, /*writable=*/true);
    f.create_group("spec").set_attr("scheme", std::string("fox"));
    f.close();
  }
  cmd.overrides = {"attention.numerics.sink=true"};
  run_and_compare(d, true);
}

TEST_F(AttentionCommandTest, GoatParametersAndHeadDimFromTheContentWidth) {
  // GOAT takes q, k of the content width d_c = head_dim - 2R - 2 = 32 - 10 = 22; the
  // command must infer head_dim 32 and read /params/goat.* (names with dots).
  const Data d = make_data(spec_of(Scheme::GOAT, 2, 1, 32), 1, 9, 9);
  ASSERT_EQ(d.q.extent(3), 22u);
  write_input(cmd.input, d);
  cmd.overrides = {"attention.scheme=goat"};
  run_and_compare(d, true);
}

TEST_F(AttentionCommandTest, Float32Precision) {
  const Data d = make_data(spec_of(Scheme::NoPE, 2, 1, 16), 1, 33, 33);
  write_input(cmd.input, d);
  cmd.precision = "float32";
  run_attention(cmd);
  const h5::File f = h5::File::open(cmd.output);
  EXPECT_EQ(std::get<std::string>(f.attr("precision")), "float32");
  // float32 against the float64 API: inputs rounded to 2^-24 relative, O(1) values, sums
  // over <= 33 keys of head width 16: well within 1e-5.
  cmd.precision = "float64";
  cmd.output = (dir / "out64.h5").string();
  run_attention(cmd);
  const h5::File f64 = h5::File::open(cmd.output);
  expect_near(f.read<double>("o"), f64.read<double>("o"), 1e-5, "o float32 vs float64");
  expect_near(f.read<double>("dq"), f64.read<double>("dq"), 1e-5, "dq float32 vs float64");
}

TEST_F(AttentionCommandTest, OverridesBeatTheConfigFile) {
  const Data d = make_data(spec_of(Scheme::NoPE, 2, 2, 8), 1, 4, 4);
  write_input(cmd.input, d);
  cmd.config = (dir / "run.toml").string();
  std::ofstream(cmd.config)
      << "[attention]\nscheme = \"alibi\"\n[attention.numerics]\nsoftcap = 5\n";
  cmd.overrides = {"attention.scheme=nope"};
  const AttentionSpec s = run_attention(cmd);
  EXPECT_EQ(s.scheme, Scheme::NoPE);
  EXPECT_EQ(s.numerics.softcap, 5.0);
  EXPECT_EQ(s.heads, 2);
  EXPECT_EQ(s.head_dim, 8);
}

TEST_F(AttentionCommandTest, NotAnHdf5File) {
  std::ofstream(cmd.input) << "q,k,v\n";
  EXPECT_EQ(error(), cmd.input + " is not an HDF5 file");
}

TEST_F(AttentionCommandTest, MissingDataset) {
  h5::File f = h5::File::create(cmd.input);
  const Data d = make_data(spec_of(Scheme::NoPE, 2, 1, 8), 1, 7, 7);
  h5::write_view(f, "q", d.q);
  h5::write_view(f, "k", d.k);
  f.close();
  EXPECT_EQ(error(), cmd.input + ": missing dataset /v (/ holds: k, q)");
}

TEST_F(AttentionCommandTest, WrongShape) {
  Data d = make_data(spec_of(Scheme::NoPE, 4, 2, 16), 1, 7, 7);
  d.v = H4<double>("v", 1, 5, 2, 16);
  write_input(cmd.input, d);
  EXPECT_EQ(error(), cmd.input + ": dataset /v has shape [1, 5, 2, 16], expected [1, 7, 2, *]");
  d = make_data(spec_of(Scheme::NoPE, 4, 2, 16), 1, 7, 7);
  d.dout = H4<double>("dout", 1, 6, 4, 16);
  write_input(cmd.input, d);
  EXPECT_EQ(error(), cmd.input + ": dataset /dout has shape [1, 6, 4, 16], expected [1, 7, 4, 16]");
}

TEST_F(AttentionCommandTest, NanAndInfNameTheDatasetAndIndex) {
  Data d = make_data(spec_of(Scheme::NoPE, 2, 2, 16), 1, 7, 7);
  d.k(0, 3, 1, 5) = std::nan("");
  write_input(cmd.input, d);
  EXPECT_EQ(error(),
            cmd.input + ": dataset /k has NaN at index [0, 3, 1, 5]; every input must be finite");
  d = make_data(spec_of(Scheme::NoPE, 2, 2, 16), 1, 7, 7);
  d.dout(0, 6, 0, 0) = -INFINITY;
  write_input(cmd.input, d);
  EXPECT_NE(error().find("dataset /dout has -Inf at index [0, 6, 0, 0]"), std::string::npos);
}

TEST_F(AttentionCommandTest, ParametersMustMatchTheScheme) {
  AttentionSpec s = spec_of(Scheme::NoPE, 4, 2, 16);
  s.numerics.sink = true;
  const Data d = make_data(s, 1, 7, 7);
  write_input(cmd.input, d, true, /*params=*/false);
  cmd.overrides = {"attention.numerics.sink=true"};
  EXPECT_EQ(
      error(),
      cmd.input + ": missing group /params; scheme 'nope' with these options takes: sink [4]");
  write_input(cmd.input, d);
  cmd.overrides = {};  // no sink: /params/sink is not a parameter of plain NoPE
  EXPECT_EQ(error(), cmd.input +
                         ": /params/sink is not a parameter; scheme 'nope' with these options "
                         "takes: none");
}

TEST_F(AttentionCommandTest, SpecProblemsNameTheirSource) {
  const Data d = make_data(spec_of(Scheme::NoPE, 4, 2, 16), 1, 7, 7);
  write_input(cmd.input, d);
  cmd.overrides = {"attention.heads=8"};
  std::string m = error();
  EXPECT_NE(m.find("attention.heads = 8 disagrees with " + cmd.input +
                   ": dataset /q has shape [1, 7, 4, 16]"),
            std::string::npos)
      << m;
  cmd.overrides = {"attention.rope.bse=1"};
  m = error();
  EXPECT_NE(m.find("unknown key 'attention.rope.bse'"), std::string::npos) << m;
  cmd.overrides = {"attention.scheme=fox"};
  m = error();
  EXPECT_NE(m.find("scheme 'fox' needs datasets /fox_cq [B, Lq, H] and /fox_ck"), std::string::npos)
      << m;
}

TEST_F(AttentionCommandTest, BadGqaGroupingIsAnApiErrorWithTheFileName) {
  const Data d = make_data(spec_of(Scheme::NoPE, 4, 4, 8), 1, 3, 3);
  Data bad = d;
  bad.k = H4<double>("k", 1, 3, 3, 8);
  bad.v = H4<double>("v", 1, 3, 3, 8);
  write_input(cmd.input, bad);
  const std::string m = error();
  EXPECT_NE(m.find(cmd.input + ": heads (4) must be a multiple of kv_heads (3)"), std::string::npos)
      << m;
}

// Issue 39 item 8: the same-file guard compares files, not names. Every other name of the
// input (./in.h5, a relative path, a symlink, a/../in.h5) is refused and the input kept.
TEST_F(AttentionCommandTest, OutputThatIsTheInputUnderAnotherNameIsRefused) {
  write_input(cmd.input, make_data(spec_of(Scheme::NoPE, 2, 1, 8), 1, 5, 5));
  fs::create_directories(dir / "sub");
  fs::create_symlink(cmd.input, dir / "link.h5");
  for (const fs::path& out : {dir / "." / "in.h5", fs::relative(cmd.input), dir / "link.h5",
                              dir / "sub" / ".." / "in.h5"}) {
    cmd.output = out.string();
    std::string m;
    try {
      run_attention(cmd);
    } catch (const Error& e) {
      m = e.what();
    }
    EXPECT_NE(m.find("--output " + cmd.output + " is the input " + cmd.input), std::string::npos)
        << out << ": " << m;
    const h5::File f = h5::File::open(cmd.input);  // still the input, not an output
    EXPECT_TRUE(f.has_dataset("q")) << out;
    EXPECT_FALSE(f.has_dataset("o")) << out;
  }
}

// Issue 39 item 9: -o "" is refused up front (not ": cannot move .tmp into place").
TEST_F(AttentionCommandTest, EmptyOutputIsRefused) {
  write_input(cmd.input, make_data(spec_of(Scheme::NoPE, 2, 1, 8), 1, 5, 5));
  cmd.output = "";
  EXPECT_EQ(error(), "--output is empty: name the file to write");
}

// A directory at <output>.tmp that lcr did not create is refused and left alone.
TEST_F(AttentionCommandTest, StaleTmpDirectoryIsRefusedNotDeleted) {
  write_input(cmd.input, make_data(spec_of(Scheme::NoPE, 2, 1, 8), 1, 5, 5));
  const std::string tmp = cmd.output + ".tmp";
  fs::create_directories(tmp);
  std::string m;
  try {
    run_attention(cmd);
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_NE(m.find(tmp + " exists and is not a file lcr wrote"), std::string::npos) << m;
  EXPECT_TRUE(fs::is_directory(tmp));
  EXPECT_FALSE(fs::exists(cmd.output));
}

TEST_F(AttentionCommandTest, InputThatIsADirectorySaysSo) {
  cmd.input = dir.string();
  EXPECT_EQ(error(), cmd.input + " is a directory, not an HDF5 file");
}

TEST_F(AttentionCommandTest, GroupInPlaceOfADatasetSaysSo) {
  h5::File f = h5::File::create(cmd.input);
  const Data d = make_data(spec_of(Scheme::NoPE, 2, 1, 8), 1, 7, 7);
  h5::write_view(f, "q", d.q);
  h5::write_view(f, "k", d.k);
  f.create_group("v");
  f.close();
  EXPECT_EQ(error(), cmd.input + ": /v is a group, not a dataset");
}

// A declared size beyond memory names the dataset and its shape (not std::bad_alloc).
TEST_F(AttentionCommandTest, HugeDeclaredSizeNamesTheDataset) {
  {
    h5::File f = h5::File::create(cmd.input);
    const hsize_t q[4] = {1, hsize_t(1) << 40, 2, 8}, kv[4] = {1, 5, 1, 8};
    h5::Handle sq(H5Screate_simple(4, q, nullptr), H5Sclose),
        skv(H5Screate_simple(4, kv, nullptr), H5Sclose);
    for (const char* n : {"q", "k", "v"}) {
      h5::Handle ds(H5Dcreate2(f.id(), n, H5T_IEEE_F64LE, n[0] == 'q' ? sq.id() : skv.id(),
                               H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                    H5Dclose);
      ASSERT_GE(ds.id(), 0);
    }
    f.close();
  }
  const std::string m = error();
  EXPECT_NE(m.find(cmd.input + ": dataset /q declares shape [1, 1099511627776, 2, 8] ("),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("cannot allocate"), std::string::npos) << m;
}

// Positions near 2^63: q_pos0 + Lq must fit int64 (it wrapped and gave a partly
// non-causal result), and a uint64 attribute beyond int64 is an error (it saturated).
TEST_F(AttentionCommandTest, PositionsThatOverflowInt64AreRefused) {
  Data d = make_data(spec_of(Scheme::RoPE, 2, 1, 8), 1, 7, 7);
  d.q_pos0 = d.k_pos0 = INT64_MAX - 5;
  write_input(cmd.input, d);
  const std::string m = error();
  EXPECT_NE(m.find(cmd.input + ": positions overflow int64: q_pos0 + Lq = "), std::string::npos)
      << m;
  d.q_pos0 = d.k_pos0 = 0;
  write_input(cmd.input, d);
  {
    h5::File f = h5::File::open(cmd.input, true);
    const uint64_t big = (uint64_t(1) << 63) + 1;
    h5::Handle sp(H5Screate(H5S_SCALAR), H5Sclose);
    h5::Handle a(H5Acreate2(f.id(), "q_pos0", H5T_STD_U64LE, sp.id(), H5P_DEFAULT, H5P_DEFAULT),
                 H5Aclose);
    ASSERT_GE(H5Awrite(a.id(), H5T_NATIVE_UINT64, &big), 0);
  }
  const std::string m2 = error();
  EXPECT_NE(m2.find("attribute 'q_pos0' of / is 9223372036854775809, beyond the int64 range"),
            std::string::npos)
      << m2;
}

// B = 0 is refused with a clear message (one rank wrote no gradients; the ring failed in
// Kokkos::deep_copy).
TEST_F(AttentionCommandTest, EmptyBatchIsRefused) {
  write_input(cmd.input, make_data(spec_of(Scheme::NoPE, 2, 1, 8), 0, 5, 5));
  const std::string m = error();
  EXPECT_NE(m.find(cmd.input + ": dataset /q has batch size B = 0"), std::string::npos) << m;
}

}  // namespace
}  // namespace lcr::cli
