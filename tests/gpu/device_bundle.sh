#!/bin/sh
# Packs this build for a GPU machine that has CUDA and PyTorch but none of
# Debian's packages (the workplace's device machine, docs/gpu.md): run from
# the build directory after make; writes DIR (default .gpu, which git must
# ignore: add it to .git/info/exclude) holding
#   root/   make install into DESTDIR (prefix as configured)
#   deps/   every shared library the binaries, the library, the vans and
#           UCX's modules need, except glibc's and the compiler's
#   ucx/    Debian's UCX modules (UCX_MODULE_DIR)
#   b/      tools/ and bench/cuda_copy_ref where tests/gpu/gpu_bench.sh
#           looks for them (PSL_BUILDDIR)
# tests/gpu/device_check.sh unpacks and uses it there.
#   tests/gpu/device_bundle.sh [DIR]
set -eu
d=${1:-.gpu}
[ -f config.status ] || { echo "$0: run it from a configured build directory, after make" >&2; exit 2; }
rm -rf "$d"
mkdir -p "$d/root" "$d/deps" "$d/b/tools" "$d/b/bench"
make install DESTDIR="$PWD/$d/root" >"$d/install.log" 2>&1 ||
	{ tail -n 20 "$d/install.log" >&2; exit 1; }
ucx=/usr/lib/x86_64-linux-gnu/ucx
[ -d "$ucx" ] && cp -a "$ucx" "$d/ucx"
cp tools/pslite-run bench/cuda_copy_ref "$d/b/bench/"
mv "$d/b/bench/pslite-run" "$d/b/tools/"
objs=$(find "$d/root" "$d/b" ${ucx:+"$d/ucx"} -type f \( -perm -u+x -o -name '*.so*' \))
# shellcheck disable=SC2086
ldd $objs 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
	grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' |
	grep -v "$PWD/$d" | while read -r l; do cp -L "$l" "$d/deps/"; done
du -sh "$d"
