# shellcheck shell=bash
# Helpers of the GPU harness experiments/bench/gpu.sh, sourced (never run) by it and by the
# exploration scripts in scripts/dev/. Nothing here prints unless asked; every function that
# runs a program bounds it with `timeout`.
#
# Packing (development machine): gpu_pack NAME BUILD_DIR EXE...
# On the GPU machine: gpu_env, gpu_unpack NAME (sets B, the bundle's bin folder), gpu_count,
# gpu_model, gpu_label, fla_install, gtest_shards, gtest_count, deadline_set / time_left, ncu_kernel_table,
# bench_train_args.

LCR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# The libraries a packed executable does NOT carry: the GPU machine (Ubuntu 24.04) has them
# in a compatible version and they must match its own tools: glibc and the compiler runtime
# (newer there), the CUDA driver, runtime, cuBLAS, cuDNN and NCCL (CUDA 13 there too), and
# Open MPI (its mpirun must load its own libmpi / open-pal / open-rte, ABI 4.1.x on both).
GPU_LIB_SKIP='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libstdc\+\+|libgcc_s|libcuda\.so|libnvidia|libnccl|libcublas|libcudnn|libcudart|libmpi\.so|libopen-pal|libopen-rte|libhwloc|libevent|libudev|libpmix)'

# gpu_pack NAME EXE...: .devbundle/NAME/{bin,lib} and .devbundle/gpack/NAME.tar.xz (what
# `carry` takes). bin/EXE is a wrapper that puts lib/ on LD_LIBRARY_PATH for that program
# only (torch and fla run beside it with their own libraries); bin/.real/EXE is the stripped
# executable; lib/ every shared library it resolves here, less GPU_LIB_SKIP, stripped.
gpu_pack() {
  local name=$1 exe base so path out="$LCR_ROOT/.devbundle/$1" gpack="$LCR_ROOT/.devbundle/gpack"
  shift
  rm -rf "$out" && mkdir -p "$out/bin/.real" "$out/lib" "$gpack" || return 1
  local exclude="$LCR_ROOT/.git/info/exclude"
  if [[ -d $LCR_ROOT/.git/info ]]; then
    grep -qxF '/.devbundle/' "$exclude" 2>/dev/null || echo '/.devbundle/' >>"$exclude"
    grep -qxF '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
  fi
  for exe in "$@"; do
    base=$(basename "$exe")
    cp "$exe" "$out/bin/.real/$base" && strip "$out/bin/.real/$base" || return 1
    # The GPU driver's libraries need not exist here (a Kokkos CUDA build links libcuda).
    if ldd "$exe" | grep 'not found' | awk '{print $1}' | grep -Evq "$GPU_LIB_SKIP"; then
      echo "pack: $exe has unresolved libraries here:" >&2
      ldd "$exe" | grep 'not found' >&2
      return 1
    fi
    while read -r so path; do
      [[ $so =~ $GPU_LIB_SKIP || -e $out/lib/$so ]] && continue
      cp -L "$path" "$out/lib/$so" && chmod u+w "$out/lib/$so" &&
        strip --strip-unneeded "$out/lib/$so" 2>/dev/null
    done < <(ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
    cat >"$out/bin/$base" <<WRAP
#!/bin/sh
# Written by experiments/bench/gpu.sh pack: runs .real/$base with the carried libraries.
d=\$(cd "\$(dirname "\$0")" && pwd)
LD_LIBRARY_PATH="\$d/../lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$d/.real/$base" "\$@"
WRAP
    chmod +x "$out/bin/$base"
  done
  # The tree's revision at pack time: the GPU machine's copy has no history of its own.
  git -C "$LCR_ROOT" describe --always --dirty --abbrev=12 >"$out/COMMIT" 2>/dev/null ||
    echo unknown >"$out/COMMIT"
  tar cf - -C "$LCR_ROOT/.devbundle" "$name" | xz -T2 -9 >"$gpack/$name.tar.xz" || return 1
  cksum <"$gpack/$name.tar.xz" >"$out/.archive"
}

# gpu_unpack NAME: B = .devbundle/NAME/bin, unpacked from .devbundle/gpack/NAME.tar.xz when
# that archive is not the one unpacked (a warm machine keeps ignored folders between calls).
gpu_unpack() {
  local dir="$LCR_ROOT/.devbundle/$1" arc="$LCR_ROOT/.devbundle/gpack/$1.tar.xz"
  if [[ -f $arc ]] && [[ ! -f $dir/.archive || $(cksum <"$arc") != "$(cat "$dir/.archive")" ]]; then
    rm -rf "$dir" && tar xJf "$arc" -C "$LCR_ROOT/.devbundle" && cksum <"$arc" >"$dir/.archive"
  fi
  B=$dir/bin
  [[ -d $B ]]
}

# gpu_env: NVLink multicast off (KINDS.md: it can take the host's GPUs out of service), a JIT
# cache for PTX-only builds, unbuffered Python, and lcr's run-time cuDNN loader
# (LCR_CUDNN_LIBRARY) pointed at the cuDNN 9
# of the machine's torch, with torch's NVIDIA library folders (nvrtc for cuDNN's run-time
# compiled engines) on LD_LIBRARY_PATH; both left alone where set already.
gpu_env() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  export PYTHONUNBUFFERED=1
  # A build that carries only PTX for this GPU (e.g. compute_80 on an H100) is compiled by the
  # driver at load; a cache large enough for all of it makes that once per machine, not per
  # process (the default 256 MiB holds a fraction).
  export CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}
  [[ -n ${LCR_CUDNN_LIBRARY:-} ]] && return 0
  local nv d
  nv=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0] + "/x"))' \
    2>/dev/null) || return 0
  if [[ -n $nv && -e $nv/cudnn/lib/libcudnn.so.9 ]]; then
    export LCR_CUDNN_LIBRARY=$nv/cudnn/lib/libcudnn.so.9
    for d in "$nv"/*/lib; do LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d; done
    export LD_LIBRARY_PATH
  fi
}

# The mpirun prefix: as root, the NVLink switches forwarded to every rank.
# shellcheck disable=SC2034  # used by the scripts that source this file
GPU_MPI=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE
  -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS)

# gpu_count: the GPUs nvidia-smi lists (0 without a driver).
gpu_count() {
  local n
  n=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU') || true
  echo "${n:-0}"
}

# gpu_model: the model of GPU 0 as nvidia-smi names it, e.g. "NVIDIA H100 80GB HBM3" ("no
# GPU" without one); gpu_label: the same with the count where there are several, e.g.
# "2x NVIDIA H200".
gpu_model() {
  local name
  name=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  echo "${name:-no GPU}"
}
gpu_label() {
  local n
  n=$(gpu_count)
  if ((n > 1)); then echo "${n}x $(gpu_model)"; else gpu_model; fi
}

# fla_install: fla's wheels carried in .whl (flash-linear-attention, fla-core) into
# /tmp/site, on PYTHONPATH; returns non-zero (fla rows then "not measured") without them.
fla_install() {
  compgen -G "$LCR_ROOT/.whl/*.whl" >/dev/null || return 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$LCR_ROOT"/.whl/*.whl >/dev/null 2>&1 || return 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  python3 -c 'import fla' 2>/dev/null
}

# deadline_set SECONDS: a deadline SECONDS from now; time_left [CAP]: the seconds left before
# it, at most CAP.
deadline_set() { GPU_DEADLINE=$((SECONDS + $1)); }
time_left() {
  local left=$((${GPU_DEADLINE:-$((SECONDS + 86400))} - SECONDS))
  ((${1:-0} > 0 && $1 < left)) && left=$1
  ((left > 0)) || left=0
  echo "$left"
}

# gtest_shards LOG TIMEOUT SHARDS FILTER BINARY [ARGS...]: BINARY in SHARDS gtest shards run at
# once, shard i on GPU i mod (the GPU count), each bounded by TIMEOUT seconds, the shards' logs
# joined into LOG, a line "# shard I exited RC" for each that did not end cleanly (124: cut
# off). The float64 references are CPU work, so shards keep the GPU busy; OMP_NUM_THREADS is
# the cores over the shards unless set.
gtest_shards() {
  local log=$1 lim=$2 n=$3 filter=$4 bin=$5 i ngpu pids=() rc
  shift 5
  ngpu=$(gpu_count)
  local omp=${OMP_NUM_THREADS:-$(($(nproc) / n > 0 ? $(nproc) / n : 1))}
  for ((i = 0; i < n; i++)); do
    local dev=()
    ((ngpu > 0)) && dev=(CUDA_VISIBLE_DEVICES=$((i % ngpu)))
    env "${dev[@]}" OMP_NUM_THREADS="$omp" GTEST_TOTAL_SHARDS="$n" GTEST_SHARD_INDEX="$i" \
      timeout -k 5 "$lim" "$bin" --gtest_filter="$filter" --gtest_color=no "$@" >"$log.$i" 2>&1 &
    pids+=($!)
  done
  : >"$log"
  for ((i = 0; i < n; i++)); do
    wait "${pids[$i]}" && rc=0 || rc=$?
    cat "$log.$i" >>"$log" && rm -f "$log.$i"
    ((rc == 0)) || echo "# shard $i exited $rc$( ((rc == 124 || rc == 137)) && echo " (cut off at $lim s)")" >>"$log"
  done
}

# gtest_count LOG: "passed P/T (skipped S, failed F)" from a gtest log, then the failed tests
# and the shards that did not end cleanly, one a line.
gtest_count() {
  local ok sk fa
  ok=$(grep -c '^\[       OK \]' "$1")
  sk=$(grep -c '^\[  SKIPPED \]' "$1")
  fa=$(grep -c '^\[  FAILED  \].*ms)' "$1")
  echo "passed $ok/$((ok + sk + fa)) (skipped $sk, failed $fa)"
  grep -h '^\[  FAILED  \].*ms)' "$1" | cut -c1-150 | head -12
  grep -h '^# shard .* exited' "$1"
}

# bench_train_args RUN: the `lcr train` overrides of a training row RUN =
# SCHEME[+cudnn|+lcr][+bf16]: the scheme, train.cuda_attention (auto unless +cudnn or +lcr) and
# train.gemm_bf16 (true with +bf16).
bench_train_args() {
  local run=$1 impl=auto bf16=false
  [[ $run == *+cudnn* ]] && impl=cudnn
  [[ $run == *+lcr* ]] && impl=lcr
  [[ $run == *+bf16 ]] && bf16=true
  echo "attention.scheme=${run%%+*} train.cuda_attention=\"$impl\" train.gemm_bf16=$bf16"
}

# ncu_kernel_table CSV: from an `ncu --metrics gpu__time_duration.sum --csv` report, the kernels
# grouped by name: total microseconds, share, launches (whatever time unit ncu printed).
ncu_kernel_table() {
  python3 - "$1" <<'PY'
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("ncu_kernel_table: no ncu rows in " + sys.argv[1])
h = rows[0]
k, v, u = h.index("Kernel Name"), h.index("Metric Value"), h.index("Metric Unit")
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
         "s": 1e6, "second": 1e6}
tot, cnt = collections.defaultdict(float), collections.Counter()
for r in rows[1:]:
    try:
        t = float(r[v].replace(",", "")) * scale.get(r[u], 1.0)
    except ValueError:
        continue
    tot[r[k][:100]] += t
    cnt[r[k][:100]] += 1
total = sum(tot.values()) or 1.0
print(f"{total:12.1f} us in {sum(cnt.values())} launches")
for name, t in sorted(tot.items(), key=lambda x: -x[1])[:40]:
    print(f"{t:12.1f} us {100 * t / total:5.1f}% {cnt[name]:5d}x  {name}")
PY
}
