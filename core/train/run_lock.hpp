#pragma once
// One writer per run directory: an advisory OS lock (flock) on <run dir>/.lock, taken by
// the rank that writes the run directory before it touches anything else there and held
// until the process ends. The kernel releases it when the process dies (kill -9 included),
// so a crash never leaves a stale lock; the file's text (host, pid, SLURM job id, start
// time) only names the holder for the error message.
#include <string>

namespace lcr::train {

// Takes the lock on `run_dir` (creating the directory) for the life of this process, or
// throws an Error naming the holder and the fix. Taking it again in the same process for
// the same directory is a no-op.
void lock_run_dir(const std::string& run_dir, const std::string& verb);

// True when the process that started this one (mpirun's daemon, a shell) is gone: then
// this rank is an orphan and must not write anything more (orphan_check).
bool launcher_died();

// Records the parent pid now (call at start); launcher_died() compares against it.
void remember_launcher();

}  // namespace lcr::train
