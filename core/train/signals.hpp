#pragma once
// SIGTERM / SIGUSR1 / SIGINT (Ctrl-C) -> "checkpoint and exit cleanly" (a scheduler's warning
// before it preempts or ends a job; SLURM: `#SBATCH --signal=B:USR1@120`, or the SIGTERM it sends
// before SIGKILL). The handler only records the signal; the training loop reads the flag
// once per step and ALL ranks agree on it through the step's all-reduce, so every rank
// checkpoints at the same step and exits 0 together (a rank that alone saw the signal
// would otherwise stop while its peers wait in the next all-reduce).
namespace lcr::train {

// Installs the handlers (idempotent); restores the previous ones at scope exit.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal number received since installation, or 0.
  static int received();
  // Testing: behave as if `sig` had arrived.
  static void raise_for_test(int sig);
};

}  // namespace lcr::train
