// HDF5 helpers: datasets and views round trip bit-exactly, attributes keep their types,
// and every failure names the file and the object.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../error_text.hpp"  // tests/error_text.hpp
#include "core/io/hdf5.hpp"

namespace lcr::h5 {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lcr_test_hdf5_" + name)).string();
}

using lcr::test::error_of;

TEST(Hdf5, ViewsAndVectorsRoundTrip) {
  const std::string path = temp_path("roundtrip.h5");
  View4<double> a("a", 2, 3, 1, 5);
  View1<float> b("b", 7);
  auto ha = Kokkos::create_mirror_view(a);
  for (size_t i = 0; i < ha.span(); ++i) ha.data()[i] = 1.0 / (i + 3.0);  // not float-exact
  Kokkos::deep_copy(a, ha);
  Kokkos::deep_copy(b, 2.5f);
  {
    File f = File::create(path);
    write_view(f, "a", a);
    const Location g = f.create_group("params");
    write_view(g, "b", b);
    const std::vector<int64_t> ints{1, -2, 3};
    g.write("ints", ints.data(), {3});
    f.close();
  }
  const File f = File::open(path);
  EXPECT_EQ(f.children(), (std::vector<std::string>{"a", "params"}));
  EXPECT_TRUE(f.has_group("params"));
  EXPECT_TRUE(f.has_dataset("params/b"));
  EXPECT_FALSE(f.has_dataset("params"));
  EXPECT_FALSE(f.has("params/none"));
  const auto a2 = read_view<View4<double>>(f, "a", {2, 3, 1, 5});
  auto h2 = Kokkos::create_mirror_view_and_copy(HostSpace(), a2);
  for (size_t i = 0; i < h2.span(); ++i) ASSERT_EQ(h2.data()[i], ha.data()[i]);
  // float64 on disk read as float32: converted by HDF5, rounded once.
  const auto a32 = f.read<float>("a");
  EXPECT_EQ(a32[4], float(ha.data()[4]));
  const auto g = f.group("params");
  EXPECT_EQ(g.path(), "/params");
  EXPECT_EQ(g.read<double>("b", {7}), std::vector<double>(7, 2.5));
  EXPECT_EQ(g.read<int64_t>("ints"), (std::vector<int64_t>{1, -2, 3}));
  std::filesystem::remove(path);
}

TEST(Hdf5, AttributesKeepTheirTypes) {
  const std::string path = temp_path("attrs.h5");
  {
    File f = File::create(path);
    f.set_attr("flag", true);
    f.set_attr("n", int64_t(-7));
    f.set_attr("x", 0.1);
    f.set_attr("name", std::string("rope"));
    f.set_attr("n", int64_t(8));  // replaces
    f.create_group("spec").set_attr("rope.base", 5e5);
    // A fixed-length, nul-padded string (numpy bytes_ / other writers), by the C API.
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, 8);
    hid_t a = H5Acreate2(f.id(), "fixed", t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, "fox\0\0\0\0\0");
    H5Aclose(a), H5Sclose(s), H5Tclose(t);
    f.close();
  }
  const File f = File::open(path);
  EXPECT_EQ(f.attr_names(), (std::vector<std::string>{"fixed", "flag", "n", "name", "x"}));
  EXPECT_EQ(std::get<std::string>(f.attr("fixed")), "fox");
  EXPECT_EQ(std::get<bool>(f.attr("flag")), true);
  EXPECT_EQ(std::get<int64_t>(f.attr("n")), 8);
  EXPECT_EQ(std::get<double>(f.attr("x")), 0.1);
  EXPECT_EQ(std::get<std::string>(f.attr("name")), "rope");
  EXPECT_EQ(std::get<double>(f.group("spec").attr("rope.base")), 5e5);
  const std::string m = error_of([&] { f.attr("missing"); });
  EXPECT_NE(m.find(path + ": missing attribute 'missing' of /"), std::string::npos) << m;
  std::filesystem::remove(path);
}

TEST(Hdf5, ErrorsNameTheFileAndTheDataset) {
  const std::string path = temp_path("errors.h5");
  {
    File f = File::create(path);
    const std::vector<double> k(1 * 5 * 2 * 16, 0.0);
    f.write("k", k.data(), {1, 5, 2, 16});
    f.write("q", k.data(), {1, 5, 2, 16});
    f.close();
  }
  const File f = File::open(path);
  std::string m = error_of([&] { f.read<double>("k", {1, 7, 2, 16}); });
  EXPECT_EQ(m, path + ": dataset /k has shape [1, 5, 2, 16], expected [1, 7, 2, 16]");
  m = error_of([&] { read_view<View3<float>>(f, "k"); });
  EXPECT_EQ(m, path + ": dataset /k has shape [1, 5, 2, 16], expected [*, *, *]");
  m = error_of([&] { f.read<double>("v"); });
  EXPECT_EQ(m, path + ": missing dataset /v (/ holds: k, q)");
  m = error_of([&] { f.group("params"); });
  EXPECT_EQ(m, path + ": no group /params");
  std::filesystem::remove(path);

  const std::string text = temp_path("not_hdf5.h5");
  std::ofstream(text) << "q,k,v\n1,2,3\n";
  EXPECT_EQ(error_of([&] { File::open(text); }), text + " is not an HDF5 file");
  std::filesystem::remove(text);
  EXPECT_EQ(error_of([&] { File::open(text); }), text + ": no such file");
  m = error_of([] { File::create("/nonexistent-dir/out.h5"); });
  EXPECT_NE(m.find("/nonexistent-dir/out.h5: cannot create the HDF5 file"), std::string::npos) << m;
}

}  // namespace
}  // namespace lcr::h5
