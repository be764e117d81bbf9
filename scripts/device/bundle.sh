#!/usr/bin/env bash
# Pack executables built here (Debian 12) so they run on the GPU machine (Ubuntu 24.04,
# no Kokkos/toml++/spdlog/fmt, nothing can be installed there), for the device tool's
# `carry`:
#
#   scripts/device/bundle.sh NAME EXE [EXE...]   ->  .devbundle/NAME/{bin,lib}
#   run(command="... .devbundle/NAME/bin/EXE ...", carry=[".devbundle/NAME"])
#
# bin/EXE is a wrapper that puts lib/ on LD_LIBRARY_PATH for that program only (the
# python/torch peers run beside it and must keep their own libraries). lib/ holds every
# shared library EXE resolves here except those the GPU machine has in a compatible
# version and that must match its own tools: glibc and the compiler runtime (newer
# there), the CUDA driver and NCCL, cuBLAS/cuDNN (CUDA 13 there too), and Open MPI (its
# mpirun must load its own libmpi/open-pal/open-rte, ABI 4.1.x on both machines).
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 NAME EXE [EXE...]" >&2; exit 2; }
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
name=$1; shift
out="$root/.devbundle/$name"
rm -rf "$out" && mkdir -p "$out/bin/.real" "$out/lib"
grep -qxF '/.devbundle/' "$root/.git/info/exclude" 2>/dev/null ||
  echo '/.devbundle/' >>"$root/.git/info/exclude"

skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libstdc\+\+|libgcc_s|libcuda\.so|libnvidia|libnccl|libcublas|libcudnn|libcudart|libmpi\.so|libopen-pal|libopen-rte|libhwloc|libevent|libudev|libpmix)'
for exe in "$@"; do
  [[ -x $exe ]] || { echo "bundle: $exe is not an executable; build it first" >&2; exit 2; }
  base=$(basename "$exe")
  cp "$exe" "$out/bin/.real/$base"
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r so path; do
    [[ $so =~ $skip ]] && continue
    [[ -e $out/lib/$so ]] || cp -L "$path" "$out/lib/$so"
    if [[ $(ldd "$exe" | grep -c "$so => not found") -ne 0 ]]; then
      echo "bundle: $so not found for $exe" >&2; exit 2
    fi
  done
  cat >"$out/bin/$base" <<WRAP
#!/bin/sh
# Wrapper written by scripts/device/bundle.sh: runs .real/$base with the carried libraries.
d=\$(cd "\$(dirname "\$0")" && pwd)
LD_LIBRARY_PATH="\$d/../lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$d/.real/$base" "\$@"
WRAP
  chmod +x "$out/bin/$base"
done
echo "bundle: $out ($(du -sh "$out" | cut -f1)); carry \".devbundle/$name\""
