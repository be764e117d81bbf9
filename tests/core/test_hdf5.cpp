// HDF5 helpers: datasets and views round trip bit-exactly, attributes keep their types,
// and every failure names the file and the object.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "../error_text.hpp"  // tests/error_text.hpp
#include "core/io/h5_util.hpp"
#include "core/io/hdf5.hpp"
#include "core/io/output_path.hpp"
#include "core/io/run_file.hpp"

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

// Runs f in a child process; returns its Error message, or "TIMEOUT" when it has not
// finished within `seconds` (the child is then killed).
template <class F>
std::string error_within(double seconds, F f) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string m = "no error";
    try {
      f();
    } catch (const std::exception& e) {
      m = e.what();
    }
    (void)!write(fds[1], m.data(), m.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  bool done = false;
  while (!done && std::chrono::steady_clock::now() < end) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[512];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0)
      done = true;
    else
      out.append(buf, size_t(n));
  }
  close(fds[0]);
  if (!done) kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return done ? out : "TIMEOUT";
}

// Issue 39 item 6: four bytes flipped in the superblock of a latest-format file (a run
// file) made SWMR readers (lcr inspect) retry for minutes. Every reader fails fast, and
// says the file is damaged.
TEST(Hdf5, DamagedSuperblockFailsFastAndSaysSo) {
  const std::string path = temp_path("damaged.h5");
  {
    io::h5u::Handle fapl = io::h5u::fapl_v110();
    io::h5u::Handle f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id()), H5Fclose);
    ASSERT_GE(f.id(), 0);
    io::h5u::Handle g(H5Gcreate2(f.id(), "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      H5Gclose);
  }
  EXPECT_EQ(error_within(10, [&] { io::RunReader::open(path); }).find("is damaged"),
            std::string::npos);                   // intact: not called damaged
  for (const std::streamoff at : {20, 28, 44}) {  // extension address, EOF, checksum
    std::filesystem::copy_file(path, path + ".bad",
                               std::filesystem::copy_options::overwrite_existing);
    {
      std::fstream b(path + ".bad", std::ios::in | std::ios::out | std::ios::binary);
      b.seekp(at);
      b.write("\xde\xad\xbe\xef", 4);
    }
    const std::string want = path + ".bad is damaged: its HDF5 superblock fails its checksum";
    const auto t0 = std::chrono::steady_clock::now();
    const std::string m = error_within(10, [&] { io::RunReader::open(path + ".bad"); });
    EXPECT_NE(m.find(want), std::string::npos) << "offset " << at << ": " << m;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
    EXPECT_NE(error_within(10, [&] { File::open(path + ".bad"); }).find(want), std::string::npos);
  }
  std::filesystem::remove(path + ".bad");
  std::filesystem::remove(path);
}

// Issue 39 item 8: outputs are compared with inputs as files (device and inode), and a
// path that does not exist yet by its canonical parent and name.
TEST(OutputPath, SameFileComparesFilesNotNames) {
  namespace fs = std::filesystem;
  const fs::path dir = temp_path("same_file");
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  std::ofstream((dir / "a.h5").string()) << "x";
  fs::create_symlink(dir / "a.h5", dir / "link.h5");
  fs::create_hard_link(dir / "a.h5", dir / "hard.h5");
  const std::string a = (dir / "a.h5").string();
  for (const fs::path& p : {dir / "." / "a.h5", dir / "sub" / ".." / "a.h5", dir / "link.h5",
                            dir / "hard.h5", fs::relative(a)})
    EXPECT_TRUE(io::same_file(p.string(), a)) << p;
  EXPECT_FALSE(io::same_file((dir / "b.h5").string(), a));
  EXPECT_TRUE(io::same_file((dir / "new.h5").string(), (dir / "sub" / ".." / "new.h5").string()));
  EXPECT_FALSE(io::same_file((dir / "new.h5").string(), (dir / "sub" / "new.h5").string()));
  EXPECT_EQ(error_of([&] { io::check_output_path("", {a}); }),
            "--output is empty: name the file to write");
  EXPECT_NE(error_of([&] {
              io::check_output_path((dir / "link.h5").string(), {a}, "-o");
            }).find("-o " + (dir / "link.h5").string() + " is the input " + a),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lcr::h5
