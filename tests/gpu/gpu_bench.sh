#!/bin/sh
# GPU buffers on a real GPU (docs/gpu.md, issue 30): skips with one line
# (exit 77) where pslite finds no CUDA runtime or GPU, which is every CI
# machine.
#   tests/gpu/gpu_bench.sh [--quick] [--vans "zmq ucx"] [--sizes "4096 65536 1048576"]
#                          [--seconds N] [--out FILE] [--mps]
# 1. bench/cuda_copy_ref at each size: pinned host <-> GPU copy bandwidth on
#    pslite's stream, and rt, one host-to-device plus one device-to-host
#    copy, each synchronised (the round trip a GPU end adds to a request);
# 2. per van and size, 1 scheduler + 1 server + 1 worker on loopback, every
#    pull checked: one key per server (latency) in push-pull, push only and
#    pull only with --mem cpu2cpu, cpu2gpu, gpu2cpu and gpu2gpu; 8 keys
#    (throughput) in push-pull with cpu2cpu and gpu2gpu;
# 3. a markdown table (p50 us of one key; Gbps of 8 keys) for docs/gpu.md,
#    written to FILE too with --out, and issue 30's ratios: the GPU
#    overhead per request, p50 minus cpu2cpu's, in round trips (goal: at
#    most 2), and gpu2gpu push-pull goodput over cpu2cpu's (goal: at least
#    0.5), with where a turn of 8 keys spent the worker's time, gpu2gpu and
#    cpu2cpu: checking the pulls (reading them back from the GPU, with one
#    copy a turn where the 8 buffers fit in 1 MiB) and issuing the
#    requests (the calls; a push from the GPU waits there for its copy).
#    Reported, not asserted: the machine's load moves them.
# 4. per van, AF batches (pslite-afbench, StepMesh's shape: 3 micro-batches
#    of 458,752 B pushed and 917,504 B pulled a step, 1 server, 1 worker,
#    every word checked) with the worker's tensors in host and in GPU
#    memory: step p50 and p99, the mean time a batch's call took (the
#    caller's wait) and from the call to its last send, and gpu/host p50.
# --mps runs the jobs under CUDA MPS (a daemon of its own, stopped at the
# end): without it, a worker and a server sharing one GPU pay the driver's
# switch between their two contexts (~300 us each time the GPU changes
# hands, docs/gpu.md), which jobs with a GPU per process do not.
# Fails only when a job fails or data is wrong; a van other than zmq that
# does not start here is skipped with one line. Defaults: zmq and ucx, 4
# KiB, 64 KiB and 1 MiB, 2 seconds a run (86 runs and 4 AF jobs: about 4 minutes);
# --quick: zmq, 64 KiB, 1 second, 50 AF steps. With PS_CUDA_LIB set to the fake runtime
# (tests/unit/.libs/libfakecudart.so) it runs against that:
# gpu_bench_fake.sh does so in make check, to keep the script working.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
secs=2 vans="zmq ucx" sizes="4096 65536 1048576" out= mps=0 afsteps=500
usage() { echo "usage: tests/gpu/gpu_bench.sh [--quick] [--vans \"zmq ucx\"] [--sizes \"4096 65536 1048576\"] [--seconds N] [--out FILE] [--mps]" >&2; exit 2; }
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || [ "$1" = --quick ] || [ "$1" = --mps ] || usage
	case $1 in
	--quick) secs=1 vans=zmq sizes=65536 afsteps=50; shift ;;
	--mps) mps=1; shift ;;
	--van|--vans) vans=$2; shift 2 ;;
	--size|--sizes) sizes=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) usage ;;
	esac
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-gpu.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM

# shellcheck disable=SC2086
"$b/bench/cuda_copy_ref" $sizes >"$dir/copy.txt" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
	echo "gpu_bench.sh: SKIP: $(sed -n 's/^cuda_copy_ref: SKIP: //p' "$dir/copy.txt")"
	exit 77
fi
[ $rc -eq 0 ] || { echo "gpu_bench.sh: cuda_copy_ref failed:" >&2; cat "$dir/copy.txt" >&2; exit 1; }
cat "$dir/copy.txt"
if [ $mps -eq 1 ]; then
	command -v nvidia-cuda-mps-control >/dev/null ||
		{ echo "gpu_bench.sh: --mps: nvidia-cuda-mps-control is not on PATH" >&2; exit 2; }
	export CUDA_MPS_PIPE_DIRECTORY="$dir/mps" CUDA_MPS_LOG_DIRECTORY="$dir/mpslog"
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	nvidia-cuda-mps-control -d || { echo "gpu_bench.sh: --mps: the MPS daemon did not start" >&2; exit 1; }
	trap 'echo quit | nvidia-cuda-mps-control; rm -rf "$dir"' EXIT
	echo "gpu_bench.sh: the jobs run under CUDA MPS"
fi

# run VAN SIZE MEM MODE KEYS: one job; appends "VAN SIZE MEM MODE KEYS GBPS
# P50" to $dir/results; 0, 1 (the job failed or data was wrong), 2 (it did
# not start)
run() {
	log=$dir/$1.$2.$3.$4.$5.log
	NUM_KEY_PER_SERVER=$5 DMLC_NODE_HOST=127.0.0.1 timeout -k 5 120 "$b/tools/pslite-run" -s 1 -w 1 \
		--van "$1" --timeout 100 -- "$b/tools/pslite-bench" "$2" 10 "$4" --mem "$3" \
		--seconds "$secs" --json --quiet >"$log" 2>&1
	rc=$?
	j=$(grep '"tool":"pslite-bench"' "$log" | sed 's/^\[[^]]*\] //')
	gbps=$(echo "$j" | sed -n 's/.*"goodput_gbps":\([0-9.]*\).*/\1/p')
	p50=$(echo "$j" | sed -n 's/.*"p50_us":\([0-9.]*\).*/\1/p')
	bad=$(echo "$j" | sed -n 's/.*"bad_bytes":\([0-9]*\).*/\1/p')
	errs=$(echo "$j" | sed -n 's/.*"errors":\([0-9]*\).*/\1/p')
	chk=$(echo "$j" | sed -n 's/.*"check_us_per_turn":\([0-9.]*\).*/\1/p')
	iss=$(echo "$j" | sed -n 's/.*"issue_us_per_turn":\([0-9.]*\).*/\1/p')
	if [ $rc -eq 0 ] && [ -n "$gbps" ] && [ "${bad:-1}" = 0 ] && [ "${errs:-1}" = 0 ]; then
		echo "$1 $2 $3 $4 $5 $gbps $p50 ${chk:-0} ${iss:-0}" >>"$dir/results"
		return 0
	fi
	[ -z "$j" ] && return 2
	echo "gpu_bench.sh: $1 $2 --mem $3 mode $4, $5 keys: exit $rc, errors ${errs:-?}, bad bytes ${bad:-?}:" >&2
	tail -n 15 "$log" >&2
	return 1
}

# af VAN MEM: one pslite-afbench job; appends "VAN MEM P50 P99 CALL_US SEND_US" to
# $dir/af; 0 or 1 (the job failed or data was wrong)
af() {
	log=$dir/af.$1.$2.log
	DMLC_NODE_HOST=127.0.0.1 timeout -k 5 120 "$b/tools/pslite-run" -s 1 -w 1 --van "$1" \
		--timeout 100 -- "$b/tools/pslite-afbench" --mem "$2" --steps $afsteps --warmup 20 \
		--json --quiet >"$log" 2>&1
	rc=$?
	j=$(grep '"tool":"pslite-afbench"' "$log" | sed 's/^\[[^]]*\] //')
	if [ $rc -eq 0 ] && echo "$j" | grep -q '"bad_words":0,"failed":0'; then
		echo "$1 $2 $(echo "$j" | sed -n 's/.*"p50_us":\([0-9.]*\),"p90_us":[0-9.]*,"p99_us":\([0-9.]*\).*"mean_call_us":\([0-9.]*\),"mean_send_us":\([0-9.]*\).*/\1 \2 \3 \4/p')" >>"$dir/af"
		return 0
	fi
	echo "gpu_bench.sh: pslite-afbench $1 --mem $2: exit $rc:" >&2
	tail -n 15 "$log" >&2
	return 1
}

fail=0
: >"$dir/results"
: >"$dir/af"
for van in $vans; do
	started=0
	for size in $sizes; do
		for mem in cpu2cpu cpu2gpu gpu2cpu gpu2gpu; do
			for mode in 1 2 3; do
				run "$van" "$size" "$mem" "$mode" 1
				rc=$?
				if [ $rc -eq 2 ] && [ $started -eq 0 ] && [ "$van" != zmq ]; then
					echo "gpu_bench.sh: SKIP van $van: $(tail -n 1 "$log")"
					continue 4
				fi
				[ $rc -eq 0 ] && started=1 || fail=1
			done
		done
		run "$van" "$size" cpu2cpu 1 8 || fail=1
		run "$van" "$size" gpu2gpu 1 8 || fail=1
	done
	af "$van" host || fail=1
	af "$van" gpu || fail=1
done

# the table and the ratios
awk -v copy="$dir/copy.txt" '
BEGIN {
	while ((getline l < copy) > 0) { split(l, f, " "); if (f[1] == "rt") rt[f[2]] = f[3] }
	name[1] = "push-pull"; name[2] = "push"; name[3] = "pull"
}
{
	k = $1 " " $2 " " $3
	if ($5 == 1) p50[k, $4] = $7; else { gbps[k] = $6; chk[k] = $8; iss[k] = $9 }
	if (!(($1 " " $2) in seen)) { seen[$1 " " $2] = 1; order[++n] = $1 " " $2 }
}
END {
	print "| van | size | mem | push-pull p50 us | push p50 us | pull p50 us | push-pull Gbps, 8 keys |"
	print "|---|---|---|---|---|---|---|"
	for (i = 1; i <= n; i++) {
		split(order[i], vs, " ")
		for (m = 1; m <= 4; m++) {
			mem = m == 1 ? "cpu2cpu" : m == 2 ? "cpu2gpu" : m == 3 ? "gpu2cpu" : "gpu2gpu"
			k = order[i] " " mem
			printf "| %s | %s | %s | %s | %s | %s | %s |\n", vs[1], vs[2], mem,
				p50[k, 1], p50[k, 2], p50[k, 3], (k in gbps) ? gbps[k] : ""
		}
	}
	print ""
	for (i = 1; i <= n; i++) {
		split(order[i], vs, " ")
		c = order[i] " cpu2cpu"
		r = rt[vs[2]]
		printf "%s %s B: rt %s us; GPU overhead per request (push-pull p50 - cpu2cpu), in rt (goal <= 2):", vs[1], vs[2], r
		for (m = 2; m <= 4; m++) {
			mem = m == 2 ? "cpu2gpu" : m == 3 ? "gpu2cpu" : "gpu2gpu"
			k = order[i] " " mem
			if (p50[k, 1] == "" || p50[c, 1] == "" || r <= 0) { printf " %s ?", mem; continue }
			printf " %s %+.1f us = %.2f", mem, p50[k, 1] - p50[c, 1], (p50[k, 1] - p50[c, 1]) / r
		}
		g = order[i] " gpu2gpu"
		if ((g in gbps) && gbps[c] > 0)
			printf "; gpu2gpu/cpu2cpu push-pull goodput, 8 keys: %.2f (goal >= 0.5); a turn of 8 spent %s and %s us checking the pulls, %s and %s us issuing", gbps[g] / gbps[c], chk[g], chk[c], iss[g], iss[c]
		printf "\n"
	}
}' "$dir/results" >"$dir/table.md"
awk '
BEGIN {
	print ""
	print "AF batches (pslite-afbench: 3 x (458752 B push, 917504 B pull) a step, 1 server):"
	print ""
	print "| van | worker tensors | step p50 us | step p99 us | a call, us | call to last send, us |"
	print "|---|---|---|---|---|---|"
}
{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6; p[$1, $2] = $3 }
END {
	for (k in p) {
		split(k, v, SUBSEP)
		if (v[2] == "gpu" && p[v[1], "host"] > 0)
			printf "%s: AF step p50, gpu/host: %.2f\n", v[1], p[k] / p[v[1], "host"]
	}
}' "$dir/af" >>"$dir/table.md"
cat "$dir/table.md"
[ -z "$out" ] || cp "$dir/table.md" "$out"
[ $fail -eq 0 ] || exit 1
echo "gpu_bench.sh: OK"
