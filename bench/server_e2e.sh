#!/bin/sh
# End to end: is pslite-server the bottleneck? Push-pull goodput per worker
# with 2 workers and 1 server, pslite-server + pslite-check --bench (BytePS's
# protocol, float32 sums) against plain pslite-bench mode 1 (push-pull, a
# server that only stores) at the same size, RUNS times each, medians.
#
#   bench/server_e2e.sh [BYTES] [KEYS] [SECONDS] [RUNS]     (from the build folder)
#
# BYTES per key (4194304), KEYS keys (4), SECONDS per run (10), RUNS (3).
# VAN=ucx etc. picks the van; PS_VAN_PATH must find it (the build's plugins/
# folders are used when it is unset).
set -u
bytes=${1:-4194304} keys=${2:-4} secs=${3:-10} runs=${4:-3}
van=${VAN:-zmq}
b=$(pwd)
[ -x "$b/tools/pslite-check" ] || { echo "run from the build folder" >&2; exit 2; }
if [ -z "${PS_VAN_PATH:-}" ]; then
	PS_VAN_PATH=$(ls -d "$b"/plugins/van_*/.libs 2>/dev/null | tr '\n' ':')
	export PS_VAN_PATH
fi
out=$(mktemp "${TMPDIR:-/tmp}/server_e2e.XXXXXX")
trap 'rm -f "$out"' EXIT

# mean goodput per worker of one run, from the workers' JSON lines
per_worker() {
	grep -o '"goodput_gbps":[0-9.]*' "$out" | cut -d: -f2 |
		awk '{s += $1; n++} END {if (n) printf "%.4f\n", s / n; else print "nan"}'
}
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

bench_runs= check_runs=
i=1
while [ "$i" -le "$runs" ]; do
	NUM_KEY_PER_SERVER=$keys "$b/tools/pslite-run" -s 1 -w 2 --van "$van" --timeout $((secs * 4 + 60)) -- \
		"$b/tools/pslite-bench" "$bytes" 1 1 --seconds "$secs" --json --quiet >"$out" 2>&1 ||
		{ echo "pslite-bench run $i failed:" >&2; tail -20 "$out" >&2; exit 1; }
	g=$(per_worker)
	bench_runs="$bench_runs $g"
	echo "run $i: pslite-bench push-pull      $g Gbps per worker"
	BYTEPS_PARTITION_BYTES=$bytes "$b/tools/pslite-run" -s 1 -w 2 --van "$van" --timeout $((secs * 4 + 60)) -- \
		"$b/tools/pslite-check" --bench --dtypes float32 --tensors "$keys" --size "$bytes" \
		--seconds "$secs" --json --quiet >"$out" 2>&1 ||
		{ echo "pslite-check run $i failed:" >&2; tail -20 "$out" >&2; exit 1; }
	grep -q "FAIL" "$out" && { echo "pslite-check run $i: FAIL" >&2; exit 1; }
	g=$(per_worker)
	check_runs="$check_runs $g"
	echo "run $i: pslite-server + pslite-check $g Gbps per worker"
	i=$((i + 1))
done
mb=$(echo $bench_runs | tr ' ' '\n' | median)
mc=$(echo $check_runs | tr ' ' '\n' | median)
echo "median of $runs: pslite-bench $mb Gbps, pslite-server $mc Gbps per worker" \
	"($keys keys x $bytes bytes, 2 workers, 1 server, van $van):" \
	"$(awk -v a="$mc" -v b="$mb" 'BEGIN {printf "%.1f%%", 100 * a / b}') of pslite-bench"
