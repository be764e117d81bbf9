# shellcheck shell=bash
# What every lcr batch script does, sourced by slurm/templates/*.sbatch (docs/slurm.md):
#   lcr_job_init          paths, NCCL/MPI settings, a header line in the job log
#   lcr_launch ARGS...    runs `lcr ARGS...` on every task of the allocation through the
#                         launcher (srun --mpi=pmix, or mpirun), in the background, so the
#                         batch shell can forward the time-limit signal; returns lcr's status
#   lcr_train_job ARGS... `lcr train ARGS...`, then requeue the job when lcr stopped early
#                         (time-limit signal, preemption, train.stop_after) with a checkpoint
#
# Settings (environment; lcr-submit sets them, `sbatch --export=ALL,...` too):
#   LCR_HOME      the lcr checkout (default: the submit directory)
#   LCR_EXE       the lcr binary (default: $LCR_HOME/${LCR_BUILD_DIR:-build}/core/cli/lcr)
#   LCR_LAUNCHER  srun (default: srun --mpi=pmix, one task per GPU/rank) | mpirun (Open MPI's
#                 own launcher across the allocation; the emulated two-node test cluster
#                 needs it, see slurm/local/cluster.sh)
#   LCR_DEVICE    gpu | cpu (GPU binding in slurm/lib/lcr-task)
#   LCR_MAX_REQUEUES  stop requeueing after this many restarts (default 50)
#
# Time limits: submit with --requeue --signal=B:USR1@<seconds>. SLURM signals only this
# shell (B:), up to 60 s early; bash runs a trap only once its foreground command returns,
# so the launcher runs in the background and the trap forwards SIGUSR1 to it (srun and
# mpirun pass SIGUSR1 on to every rank; SIGTERM to srun would SIGKILL the tasks). lcr's
# ranks agree on the stop step through their per-step all-reduce, checkpoint and exit 0;
# this shell then calls `scontrol requeue`, and the requeued job (SLURM_RESTART_COUNT + 1,
# after SLURM's requeue delay of about 2 minutes) runs the same command, which resumes
# from the newest complete checkpoint (docs/training.md, "Resume").

LCR_SLURM_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

lcr_log() { echo "[lcr-job $(date -u +%H:%M:%S)] $*"; }

lcr_job_init() {
  : "${LCR_HOME:=${SLURM_SUBMIT_DIR:-$PWD}}"
  : "${LCR_EXE:=$LCR_HOME/${LCR_BUILD_DIR:-build}/core/cli/lcr}"
  : "${LCR_LAUNCHER:=srun}"
  : "${LCR_DEVICE:=gpu}"
  export LCR_HOME LCR_EXE LCR_LAUNCHER LCR_DEVICE
  if [ ! -x "$LCR_EXE" ]; then
    echo "lcr-job: lcr binary $LCR_EXE not found: build it (scripts/build.sh) or set LCR_EXE" >&2
    exit 2
  fi
  # NCCL over NVLink/InfiniBand. NVLS (NVLink SHARP multicast) stays off: it needs the
  # fabric manager's multicast support, which shared nodes often lack, and fails at init.
  export NCCL_NVLS_ENABLE=0
  # lcr's world communicator stays MPI (its traffic is host memory: run-directory
  # agreement, metrics); GPU training makes its own NCCL communicator, bootstrapped through
  # MPI, for the ring and the gradient all-reduce (core/train/gpu_engine.cpp).
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  export NCCL_ASYNC_ERROR_HANDLING=${NCCL_ASYNC_ERROR_HANDLING:-1}
  # Open MPI under a batch job: as root it needs these; harmless otherwise.
  if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  lcr_log "job ${SLURM_JOB_ID:-?}${SLURM_ARRAY_TASK_ID:+ (array ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID})}" \
    "restart ${SLURM_RESTART_COUNT:-0} | ${SLURM_JOB_NUM_NODES:-1} node(s) ${SLURM_JOB_NODELIST:-}" \
    "| ${SLURM_NTASKS:-1} tasks | launcher $LCR_LAUNCHER | device $LCR_DEVICE | $LCR_EXE"
}

# Tasks per node of the allocation: SLURM_NTASKS_PER_NODE, or SLURM_TASKS_PER_NODE's
# first count ("2(x2)" -> 2), or tasks / nodes.
lcr_tasks_per_node() {
  if [ -n "${SLURM_NTASKS_PER_NODE:-}" ]; then
    echo "${SLURM_NTASKS_PER_NODE%%(*}"
  elif [ -n "${SLURM_TASKS_PER_NODE:-}" ]; then
    local t=${SLURM_TASKS_PER_NODE%%,*}
    echo "${t%%(*}"
  else
    echo $(((${SLURM_NTASKS:-1} + ${SLURM_JOB_NUM_NODES:-1} - 1) / ${SLURM_JOB_NUM_NODES:-1}))
  fi
}

# The launcher command line for every task of the allocation, in the array LCR_CMD.
lcr_launcher_cmd() {
  local task=$LCR_SLURM_LIB/lcr-task
  case $LCR_LAUNCHER in
    srun)
      # PMIx is the MPI bootstrap (Debian's Open MPI is built for it; pmi2 does not work).
      LCR_CMD=(srun --mpi=pmix --kill-on-bad-exit=1 "$task" "$LCR_EXE")
      ;;
    mpirun)
      LCR_CMD=(mpirun -np "${SLURM_NTASKS:-1}" --map-by "ppr:$(lcr_tasks_per_node):node"
        --bind-to none "$task" "$LCR_EXE")
      ;;
    *)
      echo "lcr-job: LCR_LAUNCHER=$LCR_LAUNCHER: use srun or mpirun" >&2
      exit 2
      ;;
  esac
}

LCR_CHILD=
LCR_GOT_SIGNAL=

_lcr_forward() {
  LCR_GOT_SIGNAL=$1
  lcr_log "got SIG$1: asking lcr to checkpoint and stop"
  [ -n "$LCR_CHILD" ] && kill -USR1 "$LCR_CHILD" 2>/dev/null
  return 0
}

# lcr_launch ARGS...: lcr ARGS... on every task; output also copied to $LCR_ATTEMPT_LOG.
lcr_launch() {
  lcr_launcher_cmd
  LCR_ATTEMPT_LOG=$(mktemp "${TMPDIR:-/tmp}/lcr-job-${SLURM_JOB_ID:-x}.XXXXXX")
  trap '_lcr_forward USR1' USR1
  trap '_lcr_forward TERM' TERM
  lcr_log "${LCR_CMD[*]} $*"
  "${LCR_CMD[@]}" "$@" > >(tee -a "$LCR_ATTEMPT_LOG") 2>&1 &
  LCR_CHILD=$!
  local rc=0
  wait "$LCR_CHILD" || rc=$?
  # A trapped signal interrupts `wait` (status > 128) while the launcher still runs.
  while kill -0 "$LCR_CHILD" 2>/dev/null; do
    rc=0
    wait "$LCR_CHILD" || rc=$?
  done
  LCR_CHILD=
  trap - USR1 TERM
  lcr_log "lcr exited with status $rc"
  return "$rc"
}

# lcr train ARGS..., then requeue when lcr checkpointed and stopped before train.steps.
lcr_train_job() {
  local rc=0 t0=$SECONDS
  lcr_launch train "$@" || rc=$?
  local stopped=0 last
  grep -q "stopping at step" "$LCR_ATTEMPT_LOG" && stopped=1
  # The job's last word, one grep-able line: how this attempt ended and where the run is.
  last=$(grep -E "\] run .* finished: |stopping at step|is complete at step|\[error\]" \
    "$LCR_ATTEMPT_LOG" | tail -1 | sed 's/^.*\] //')
  lcr_log "summary: job ${SLURM_JOB_ID:-?} attempt $((${SLURM_RESTART_COUNT:-0} + 1)), exit $rc after $((SECONDS - t0)) s: ${last:-no lcr summary line (see above)}"
  rm -f "$LCR_ATTEMPT_LOG"
  if [ "$rc" -eq 0 ] && [ "$stopped" -eq 1 ]; then
    if [ "${SLURM_RESTART_COUNT:-0}" -ge "${LCR_MAX_REQUEUES:-50}" ]; then
      lcr_log "stopped with a checkpoint, but already requeued ${SLURM_RESTART_COUNT} times: not again"
      return 0
    fi
    lcr_log "lcr stopped with a checkpoint${LCR_GOT_SIGNAL:+ (SIG$LCR_GOT_SIGNAL)}: requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID"
    # SLURM ends this attempt now; the requeued one resumes from the checkpoint.
    sleep 300
  fi
  return "$rc"
}

# lcr_sweep_task PLAN ROW: row ROW (the `index` column) of a sweep plan (a TSV file with a
# header, written by `lcr-submit sweep`) as one `lcr scaling-point` over the allocation.
lcr_sweep_task() {
  local plan=$1 row=$2 k v
  local -A f=()
  while IFS=$'\t' read -r k v; do f[$k]=$v; done < <(awk -F'\t' -v row="$row" '
    NR == 1 { for (i = 1; i <= NF; i++) name[i] = $i; next }
    $1 == row { for (i = 1; i <= NF; i++) print name[i] "\t" $i }' "$plan")
  if [ -z "${f[index]:-}" ]; then
    echo "lcr-job: no row $row in the sweep plan $plan" >&2
    exit 2
  fi
  local want=$((f[nodes] * f[tasks_per_node]))
  if [ "${SLURM_NTASKS:-1}" -ne "$want" ]; then
    echo "lcr-job: plan row $row wants ${f[nodes]} x ${f[tasks_per_node]} tasks," \
      "the allocation has ${SLURM_NTASKS:-1}: submit it with lcr-submit sweep" >&2
    exit 2
  fi
  local extra=()
  [ -n "${f[extra]:-}" ] && read -r -a extra <<<"${f[extra]}"
  lcr_launch scaling-point --results "${f[results]}" --sweep "${f[sweep]}" --kind "${f[kind]}" \
    --scheme "${f[scheme]}" --layout "${f[layout]}" --seq-len "${f[seq_len]}" \
    --batch "${f[batch]}" --heads "${f[heads]}" --kv-heads "${f[kv_heads]}" \
    --head-dim "${f[head_dim]}" --cp "${f[cp]}" --reps "${f[reps]}" \
    --scaling "${f[scaling]}" --precision "${f[precision]}" "${extra[@]}"
  local rc=$?
  rm -f "$LCR_ATTEMPT_LOG"
  return "$rc"
}
