#!/bin/sh
# GPU buffers on a real GPU (docs/gpu.md): skips with one line (exit 77)
# where pslite finds no CUDA runtime or GPU, which is every CI machine.
#   tests/gpu/gpu_bench.sh [--quick] [--van NAME] [--size BYTES]
# 1. bench/cuda_copy_ref: cudaMemcpyAsync bandwidth, pinned host <-> GPU;
# 2. pslite-bench push-pull, push only and pull only with --mem cpu2cpu,
#    cpu2gpu, gpu2gpu and gpu2cpu, 1 scheduler + 1 server + 1 worker on
#    loopback, every pull checked;
# 3. a table, and the goal: gpu2gpu push-pull at least half of
#    min(host-device copy, cpu2cpu push-pull) (reported, not asserted: the
#    machine's load moves it).
# Fails only when a job fails or data is wrong. With PS_CUDA_LIB set to the
# fake runtime (tests/unit/.libs/libfakecudart.so) it runs against that:
# gpu_bench_fake.sh does so in make check, to keep the script working.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
secs=5 van=zmq size=1048576
while [ $# -gt 0 ]; do
	case $1 in
	--quick) secs=1; shift ;;
	--van) van=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	*) echo "usage: tests/gpu/gpu_bench.sh [--quick] [--van NAME] [--size BYTES]" >&2; exit 2 ;;
	esac
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-gpu.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM

"$b/bench/cuda_copy_ref" "$size" >"$dir/copy.txt" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
	echo "gpu_bench.sh: SKIP: $(sed -n 's/^cuda_copy_ref: SKIP: //p' "$dir/copy.txt")"
	exit 77
fi
[ $rc -eq 0 ] || { echo "gpu_bench.sh: cuda_copy_ref failed:" >&2; cat "$dir/copy.txt" >&2; exit 1; }
cat "$dir/copy.txt"
h2d=$(awk '$1 == "h2d" {print $3}' "$dir/copy.txt")
d2h=$(awk '$1 == "d2h" {print $3}' "$dir/copy.txt")

fail=0
printf '%-8s %-10s %10s %10s\n' mem mode Gbps p50_us
for mem in cpu2cpu cpu2gpu gpu2gpu gpu2cpu; do
	for mode in 1 2 3; do
		log=$dir/$mem.$mode.log
		NUM_KEY_PER_SERVER=8 DMLC_NODE_HOST=127.0.0.1 timeout -k 5 120 "$b/tools/pslite-run" -s 1 -w 1 \
			--van "$van" --timeout 100 -- "$b/tools/pslite-bench" "$size" 10 "$mode" --mem "$mem" \
			--seconds "$secs" --json --quiet >"$log" 2>&1
		rc=$?
		j=$(grep '"tool":"pslite-bench"' "$log" | sed 's/^\[[^]]*\] //')
		gbps=$(echo "$j" | sed -n 's/.*"goodput_gbps":\([0-9.]*\).*/\1/p')
		p50=$(echo "$j" | sed -n 's/.*"p50_us":\([0-9.]*\).*/\1/p')
		bad=$(echo "$j" | sed -n 's/.*"bad_bytes":\([0-9]*\).*/\1/p')
		errs=$(echo "$j" | sed -n 's/.*"errors":\([0-9]*\).*/\1/p')
		if [ $rc -ne 0 ] || [ -z "$gbps" ] || [ "${bad:-1}" != 0 ] || [ "${errs:-1}" != 0 ]; then
			echo "gpu_bench.sh: --mem $mem mode $mode: exit $rc, errors ${errs:-?}, bad bytes ${bad:-?}:" >&2
			tail -n 15 "$log" >&2
			fail=1
			continue
		fi
		printf '%-8s %-10s %10s %10s\n' "$mem" "$(case $mode in 1) echo push_pull ;; 2) echo push ;; 3) echo pull ;; esac)" "$gbps" "$p50"
		echo "$mem $mode $gbps" >>"$dir/table"
	done
done
[ $fail -eq 0 ] || exit 1
cpu=$(awk '$1 == "cpu2cpu" && $2 == 1 {print $3}' "$dir/table")
gpu=$(awk '$1 == "gpu2gpu" && $2 == 1 {print $3}' "$dir/table")
awk -v h2d="$h2d" -v d2h="$d2h" -v cpu="$cpu" -v gpu="$gpu" 'BEGIN {
	copy = (h2d < d2h ? h2d : d2h) * 8   # GB/s -> Gbps
	ref = copy < cpu ? copy : cpu
	printf "goal: gpu2gpu push-pull %.3f Gbps against min(copy %.3f Gbps, cpu2cpu %.3f Gbps) = %.3f: %.2f of it (goal 0.5)\n", gpu, copy, cpu, ref, (ref > 0 ? gpu / ref : 0)
}'
echo "gpu_bench.sh: OK"
