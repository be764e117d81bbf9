#include "core/train/setup.hpp"

#include <mpi.h>
#include <sched.h>
#include <sys/resource.h>

#include <type_traits>
#include <vector>

#include "core/train/world.hpp"
#include "kernels/base/error.hpp"
#include "parallel/ring/layout.hpp"

#ifndef LCR_VERSION
#define LCR_VERSION "unknown"
#endif

namespace lcr::train {

Setup prepare(const TrainConfig& in, int job_ranks) {
  Setup s;
  s.cfg = in;
  TrainConfig& cfg = s.cfg;
  std::unique_ptr<Communicator> world;
  if (job_ranks <= 0) world = world_communicator();
  const int W = world ? world->size() : job_ranks, cp = cfg.parallel.cp;
  require(W % cp == 0, "parallel.cp = ", cp, " does not divide the ", W,
          " ranks of this job; launch a multiple of ", cp, " ranks (mpirun -np ", cp,
          ") or choose a parallel.cp that divides ", W);
  require(cfg.parallel.dp == 0 || cfg.parallel.dp * cp == W, "parallel.dp = ", cfg.parallel.dp,
          " times parallel.cp = ", cp, " must equal the ", W,
          " ranks of this job (or set parallel.dp = 0 to take world size / cp = ", W / cp, ")");
  cfg.parallel.dp = W / cp;
  try {
    SeqLayout check(cfg.parallel.layout, cfg.train.seq_len, cp);
  } catch (const Error& e) {
    throw_error("train.seq_len = ", cfg.train.seq_len, " cannot be split over parallel.cp = ", cp,
                " ranks: ", e.what());
  }
  if (world) s.grid = std::make_unique<ProcessGrid>(std::move(world), cp);

  s.feed = std::make_unique<DataFeed>(cfg);
  const int32_t data_vocab = s.feed->vocab_size();
  if (cfg.model.vocab_size == 0) {
    cfg.model.vocab_size = data_vocab;
  } else if (cfg.is_task()) {
    require(cfg.model.vocab_size >= data_vocab, "model.vocab_size = ", cfg.model.vocab_size,
            " is smaller than the task's vocabulary ", data_vocab, " (", s.feed->describe(),
            "); set model.vocab_size = 0 to take it from the data");
  } else {
    require(cfg.model.vocab_size == data_vocab, "model.vocab_size = ", cfg.model.vocab_size,
            " does not match the data's vocabulary ", data_vocab, " (", s.feed->describe(),
            "); set model.vocab_size = 0 to take it from the data");
  }
  config::check_train_config(cfg);
  // config.toml describes the run, not this command's action: a rerun with it (a requeued
  // job) must resume, not wipe the run again.
  TrainConfig written = cfg;
  written.run.overwrite = false;
  written.train.resume_from.clear();  // this job's choice of checkpoint, not the run's
  s.config_toml = config::train_config_toml(written);
  return s;
}

void agree(Communicator& world, const std::string& what, const std::function<void()>& fn) {
  std::string error;
  try {
    fn();
  } catch (const std::exception& e) {
    error = e.what();
  }
  double failed = error.empty() ? 0.0 : 1.0;
  world.allreduce_sum(&failed, 1);
  if (!error.empty()) throw Error(error);
  require(failed == 0, what, " failed on another rank (its message says why)");
}

std::string lcr_version() { return LCR_VERSION; }

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string v(buf, size_t(len));
  const auto nl = v.find_first_of("\r\n,");
  return nl == std::string::npos ? v : v.substr(0, nl);
}

std::string device_description() {
  return std::string("kokkos:") + ExecSpace::name() + " (" +
         std::to_string(ExecSpace().concurrency()) + " threads)";
}

std::string thread_binding_warning() {
  using Host = Kokkos::DefaultHostExecutionSpace;
  if (!std::is_same_v<ExecSpace, Host>) return {};  // Kokkos runs on a GPU
  // The CPUs the threads may run on, together: with OMP_PROC_BIND each thread is pinned to
  // its own place, so one thread's mask says nothing; a rank that mpirun bound to one core
  // has every thread's mask inside that core.
  const int threads = Host().concurrency();
  std::vector<cpu_set_t> masks(static_cast<size_t>(threads));
  for (auto& m : masks) CPU_ZERO(&m);
  Kokkos::parallel_for(
      "lcr::thread_affinity",
      Kokkos::RangePolicy<Host, Kokkos::Schedule<Kokkos::Static>>(0, threads).set_chunk_size(1),
      [&](int i) { sched_getaffinity(0, sizeof(cpu_set_t), &masks[size_t(i)]); });
  Host().fence();
  cpu_set_t all;
  CPU_ZERO(&all);
  for (auto& m : masks) CPU_OR(&all, &all, &m);
  const int cpus = CPU_COUNT(&all);
  if (cpus == 0 || threads <= cpus) return {};
  return "this rank runs " + std::to_string(threads) + " Kokkos threads on " +
         std::to_string(cpus) +
         " CPU(s) it is bound to, so they time-share: give each rank its cores (mpirun "
         "--map-by slot:PE=<threads> or --bind-to none; srun --cpus-per-task=<threads>) or set "
         "OMP_NUM_THREADS=" +
         std::to_string(cpus);
}

int64_t peak_memory_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace lcr::train
