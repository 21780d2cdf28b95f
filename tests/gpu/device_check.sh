#!/bin/sh
# Issue 30's checks on a GPU machine with CUDA and PyTorch but no Debian
# packages (the workplace's device machine): run as root from the checkout,
# with the folder tests/gpu/device_bundle.sh wrote (.gpu) beside it. Puts
# the install tree at its prefix, points the loader at the bundled
# libraries, then, each step bounded: pslite-info; gpu_bench.sh over zmq
# and ucx (the table for docs/gpu.md); gpu_order.sh over zmq and ucx (with
# StepMesh's fserver test on CUDA tensors); gpu_bench.sh over fabric; one
# ibverbs start; gpu_bench.sh --mps over zmq, ucx and fabric (both ends on
# the one GPU without the cost of switching between their contexts). Logs
# and the tables go to OUTDIR. PSL_DEVICE_STEPS names the steps to run
# (default all: info bench_zmq_ucx order bench_fabric
# bench_ibverbs bench_mps).
#   tests/gpu/device_check.sh [OUTDIR] [SECONDS_PER_RUN]
set -u
o=${1:-${OUT:-/tmp/pslite-gpu-out}}
secs=${2:-1}
g=$PWD/.gpu
[ -d "$g/root" ] || { echo "$0: no $g/root: run tests/gpu/device_bundle.sh here first and carry .gpu" >&2; exit 2; }
mkdir -p "$o"
r=${PSL_DEVICE_ROOT:-/} # where the install tree goes (another folder to try the script)
mkdir -p "$r" && cp -a "$g/root/." "$r"
export LD_LIBRARY_PATH="$g/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d "$g/ucx" ] && export UCX_MODULE_DIR="$g/ucx"
bin=$(dirname "$(find "$g/root" -name pslite-bench -type f | head -n 1)")
lib=$(dirname "$(find "$g/root" -name 'libpslite.so.0' | head -n 1)")
lib=${r%/}${lib#"$g/root"}
cp "$bin"/pslite-* "$g/b/tools/"
export LD_LIBRARY_PATH="$lib:$LD_LIBRARY_PATH"
py=${PSL_PYTHON:-python3}
export PSL_BUILDDIR="$g/b" PSL_SRCDIR="$PWD" PSLITE_LIB="$lib/libpslite.so.0" PS_VAN_PATH="$lib/pslite"
export DMLC_NODE_HOST=127.0.0.1 DMLC_INTERFACE=lo PYTHONUNBUFFERED=1
fail=0
# step NAME SECONDS CMD...: CMD's output to the screen and OUTDIR/NAME.log
steps=${PSL_DEVICE_STEPS:-info bench_zmq_ucx order bench_fabric bench_ibverbs bench_mps}
step() {
	n=$1 t=$2
	shift 2
	case " $steps " in *" $n "*) ;; *) return 0 ;; esac
	echo "=== $n ($(date +%T))"
	timeout -k 5 "$t" "$@" >"$o/$n.log" 2>&1
	rc=$?
	cat "$o/$n.log"
	echo "=== $n: exit $rc"
	[ $rc -eq 0 ] || [ $rc -eq 77 ] || fail=1
}
step info 30 sh -c 'nvidia-smi -L; $0 -c "import torch; print(\"torch\", torch.__version__, torch.version.cuda)"; "$PSL_BUILDDIR/tools/pslite-info"' "$py"
step bench_zmq_ucx 240 tests/gpu/gpu_bench.sh --vans "zmq ucx" --seconds "$secs" --out "$o/table_zmq_ucx.md"
step order 120 tests/gpu/gpu_order.sh zmq ucx
step bench_fabric 150 tests/gpu/gpu_bench.sh --vans fabric --seconds "$secs" --out "$o/table_fabric.md"
step bench_ibverbs 40 tests/gpu/gpu_bench.sh --vans ibverbs --sizes 4096 --seconds "$secs"
step bench_mps 300 tests/gpu/gpu_bench.sh --mps --vans "zmq ucx fabric" --seconds "$secs" --out "$o/table_mps.md"
exit $fail
