#!/usr/bin/env bash
# A real, private SLURM cluster on this machine: munged, slurmctld and two slurmd (nodes
# n1 and n2, both 127.0.0.1 on their own ports), for the tests in tests/slurm and for
# trying the templates without a cluster. Everything lives in one state directory; the
# daemons are started as this script's children (no systemd) and stopped by pid.
#
#   slurm/local/cluster.sh start  [DIR]   write DIR/slurm.conf, start the daemons, wait
#                                         until both nodes are idle (DIR: $LCR_SLURM_DIR,
#                                         default /tmp/lcr-slurm)
#   slurm/local/cluster.sh stop   [DIR]   cancel every job, stop the daemons
#   slurm/local/cluster.sh status [DIR]   sinfo + squeue; exit 1 when not running
#   slurm/local/cluster.sh env    [DIR]   prints `export SLURM_CONF=DIR/slurm.conf`
#
# Then: export SLURM_CONF=DIR/slurm.conf; sbatch / squeue / scontrol talk to it.
# Facts this relies on (../../../shared/NOTES-slurm-hdf5.md, checked on Debian 12, slurm-wlm
# 22.05): munged refuses root, so it runs as the munge user with a private key and socket;
# proctrack/linuxproc and task/none (the cgroup plugins need systemd); two slurmd on one
# host need distinct ports and %n in their paths. The node names need not resolve (SLURM
# uses NodeAddr; mpirun inside a job reaches the second node through srun), so /etc/hosts
# stays untouched.
set -euo pipefail

cmd=${1:-}
dir=${2:-${LCR_SLURM_DIR:-/tmp/lcr-slurm}}
conf=$dir/slurm.conf
nodes=(n1 n2)

die() { echo "cluster.sh: $*" >&2; exit 1; }

need_tools() {
  for t in slurmctld slurmd munged sinfo scontrol; do
    command -v "$t" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$t" >/dev/null 2>&1 ||
      die "$t not found: install slurm-wlm and munge (scripts/install-deps.sh)"
  done
  export PATH=$PATH:/usr/sbin:/sbin
  [ "$(id -u)" -eq 0 ] || die "the local cluster runs slurmd, which must be root to start jobs: run as root"
}

# Three free TCP ports on 127.0.0.1 (controller, n1, n2), so that several clusters
# (parallel test runs) can coexist.
free_ports() {
  python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {
  local cpus mem
  read -r cpus mem < <(slurmd -C | awk '/NodeName/ {for (i = 1; i <= NF; i++) {
      split($i, kv, "="); if (kv[1] == "CPUs") c = kv[2]; if (kv[1] == "RealMemory") m = kv[2] }
      print c, m }')
  # Each emulated node offers every core and a quarter of the memory (they share them).
  mem=$((mem / 4))
  read -r p0 p1 p2 < <(free_ports)
  mkdir -p "$dir"/{state,log,spool,munge}
  cat >"$conf" <<EOF
# Written by slurm/local/cluster.sh: a two-node test cluster on 127.0.0.1.
ClusterName=lcrlocal
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$p0
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Jobs stay visible to scontrol for 10 minutes after they end (the tests read their state).
MinJobAge=600
KillWait=10
InactiveLimit=0
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=n1 NodeAddr=127.0.0.1 Port=$p1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 Port=$p2 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
  # A private key and socket: no interference with a system munged. The folder is
  # world-readable (the key itself stays 0400) so that every account of the machine can
  # reach the socket and submit, as on a real cluster (tests/install/check_new_user.sh).
  chown munge: "$dir/munge"
  chmod 0755 "$dir/munge"
  if [ ! -f "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chown munge: "$dir/munge/munge.key"
    chmod 0400 "$dir/munge/munge.key"
  fi
  runuser -u munge -- munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" --force </dev/null >>"$dir/log/daemons.log" 2>&1
}

wait_idle() {
  local deadline=$((SECONDS + 60)) state
  while [ $SECONDS -lt $deadline ]; do
    state=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | tr '\n' ' ')
    [[ $state == "n1 idle n2 idle " ]] && return 0
    sleep 1
  done
  die "nodes not idle after 60 s (sinfo: ${state:-no answer}); logs in $dir/log"
}

start() {
  need_tools
  if pid_alive "$dir/slurmctld.pid"; then
    echo "cluster.sh: already running ($conf)"
    return 0
  fi
  rm -rf "$dir"
  write_conf
  export SLURM_CONF=$conf
  start_munge || die "munged did not start: $(tail -3 "$dir/log/daemons.log")"
  # Daemon output goes to a file: a caller reading our stdout (ctest) must not wait for
  # daemons that inherited it.
  slurmctld -f "$conf" -i </dev/null >>"$dir/log/daemons.log" 2>&1 ||
    die "slurmctld did not start: $(tail -3 "$dir/log/daemons.log")"
  for n in "${nodes[@]}"; do
    slurmd -f "$conf" -N "$n" </dev/null >>"$dir/log/daemons.log" 2>&1 ||
      die "slurmd -N $n did not start: $(tail -3 "$dir/log/daemons.log")"
  done
  wait_idle
  echo "cluster.sh: running; export SLURM_CONF=$conf"
}

# Sends `sig` to the daemon in pidfile and waits up to 15 s for it to go.
stop_pid() {
  local f=$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  kill -TERM "$p" 2>/dev/null || return 0
  for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
}

stop() {
  export PATH=$PATH:/usr/sbin:/sbin SLURM_CONF=$conf
  [ -f "$conf" ] || { echo "cluster.sh: nothing at $dir"; return 0; }
  if pid_alive "$dir/slurmctld.pid"; then
    # Cancel every job and give the steps time to end, so no job process outlives us.
    local jobs
    mapfile -t jobs < <(squeue -h -o %A 2>/dev/null)
    [ ${#jobs[@]} -eq 0 ] || scancel --quiet "${jobs[@]}" 2>/dev/null || true
    for _ in $(seq 30); do
      [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break
      sleep 1
    done
  fi
  for n in "${nodes[@]}"; do stop_pid "$dir/slurmd.$n.pid"; done
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munge/munged.pid"
  echo "cluster.sh: stopped ($dir)"
}

status() {
  export PATH=$PATH:/usr/sbin:/sbin SLURM_CONF=$conf
  pid_alive "$dir/slurmctld.pid" || { echo "cluster.sh: not running ($dir)"; return 1; }
  sinfo -N
  squeue
}

case $cmd in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) die "usage: $0 start|stop|status|env [STATE_DIR]" ;;
esac
