#include "core/train/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>

#include "kernels/base/error.hpp"

namespace lcr::train {
namespace {

std::map<std::string, int>& held() {
  static std::map<std::string, int> m;  // canonical dir -> fd, never closed
  return m;
}

pid_t g_parent = 0;

std::string read_fd(int fd) {
  std::string s;
  char buf[512];
  ssize_t n;
  if (::lseek(fd, 0, SEEK_SET) < 0) return s;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, size_t(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

void lock_run_dir(const std::string& run_dir, const std::string& verb) {
  namespace fs = std::filesystem;
  fs::create_directories(run_dir);
  const std::string key = fs::canonical(run_dir).string();
  if (held().count(key)) return;
  const std::string path = run_dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  require(fd >= 0, "cannot open the run directory's lock file ", path, ": ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = read_fd(fd);
    ::close(fd);
    require(err == EWOULDBLOCK, "cannot lock ", path, ": ", std::strerror(err));
    if (holder.empty()) holder = "a process that has just started (no details written yet)";
    throw_error("the run directory ", run_dir, " is in use by another writer: ", holder,
                ". A run directory has one writer at a time; nothing was written. Wait for "
                "that job to end (or stop it: it checkpoints on SIGTERM/SIGUSR1), or give this ",
                verb, " another run.name");
  }
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char when[64] = {0};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::string text =
      std::string("lcr ") + verb + " on host " + host + ", pid " + std::to_string(::getpid());
  if (const char* job = std::getenv("SLURM_JOB_ID")) text += std::string(", SLURM job ") + job;
  text += std::string(", started ") + when + "\n";
  if (::ftruncate(fd, 0) == 0) {
    ssize_t ignored = ::pwrite(fd, text.data(), text.size(), 0);
    (void)ignored;
  }
  held()[key] = fd;  // held until the process ends; the kernel releases it then
}

void remember_launcher() {
  // Only under an MPI launcher: a plain `nohup lcr train &` outlives its shell on purpose.
  if (std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK")) {
    g_parent = ::getppid();
    // The kernel kills this rank when mpirun dies (a rank blocked in a collective whose peer
    // already stopped would never reach the getppid() check); then re-check for a parent
    // that died before the call.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != g_parent) std::_Exit(1);
  }
}

bool launcher_died() { return g_parent != 0 && ::getppid() != g_parent; }

}  // namespace lcr::train
