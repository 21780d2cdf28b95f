#!/bin/sh
# bench/run.sh: pslite-bench beside a raw TCP reference, interleaved, several
# times, on loopback; writes a table and a plot into docs/performance.md.
#
#   bench/run.sh [--repeat N] [--seconds S] [--van NAME] [--quick] [--no-doc]
#
# Environment: PSL_BUILDDIR (default: the source tree, built in place),
# EXTRA_ENV (extra variables for the pslite nodes, e.g. "UCX_TLS=tcp").
#
# What it measures (1 scheduler, 1 server, 1 worker unless said otherwise):
#   - push-pull, push-only and pull-only goodput and latency for
#     4 KiB x 1 key, 4 KiB / 64 KiB / 1 MiB / 8 MiB x 40 keys, beside
#     bench/tcp_ref (echo, push, pull) with the same number in flight;
#   - 2 servers + 4 workers against 1 + 1: goodput per core used;
#   - CPU of idle nodes (pslite-bench --idle);
#   - resident size over a million messages.
# Medians of --repeat runs; pslite and the reference alternate, so that both
# see the same machine. Needs gnuplot for the plot (apt-get install gnuplot-nox).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
B=${PSL_BUILDDIR:-$top}
REPEAT=3
SECS=5
VAN=zmq
QUICK=0
DOC=1
while [ $# -gt 0 ]; do
	case $1 in
	--repeat) REPEAT=$2; shift 2 ;;
	--seconds) SECS=$2; shift 2 ;;
	--van) VAN=$2; shift 2 ;;
	--quick) QUICK=1; REPEAT=1; SECS=2; shift ;;
	--no-doc) DOC=0; shift ;;
	*) echo "usage: bench/run.sh [--repeat N] [--seconds S] [--van NAME] [--quick] [--no-doc]" >&2; exit 2 ;;
	esac
done

for f in tools/pslite-run tools/pslite-bench bench/tcp_ref; do
	[ -x "$B/$f" ] || { echo "bench/run.sh: $B/$f is missing: build first (make), or set PSL_BUILDDIR" >&2; exit 2; }
done
vp=
for d in "$B"/plugins/*/.libs; do [ -d "$d" ] && vp=${vp:+$vp:}$d; done
export PS_VAN_PATH=${PS_VAN_PATH:-$vp}

jobenv=
work=$(mktemp -d "${TMPDIR:-/tmp}/pslite-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
results=$work/results.jsonl
: >"$results"

# jget KEY: the value of "KEY" in the JSON line on stdin
jget() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" | head -n 1; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# pslite S W SIZE KEYS_PER_SERVER MODE TAG [args]: one pslite-bench job
pslite() {
	S=$1 W=$2 size=$3 keys=$4 mode=$5 tag=$6
	shift 6
	out=$work/job.out
	env ${EXTRA_ENV:-} NUM_KEY_PER_SERVER="$keys" LOG_DURATION=10 $jobenv \
		"$B/tools/pslite-run" -s "$S" -w "$W" --van "$VAN" --timeout $((SECS * 4 + 120)) -- \
		"$B/tools/pslite-bench" "$size" 1 "$mode" --json --quiet "$@" >"$out" 2>&1 || {
		echo "bench/run.sh: a pslite job failed ($tag):" >&2
		tail -n 30 "$out" >&2
		return 1
	}
	grep -o '{"tool".*}' "$out" | sed "s/^{/{\"tag\":\"$tag\",/" >>"$results"
}

ref() { # ref SIZE WINDOW MODE TAG
	"$B/bench/tcp_ref" "$1" "$2" "$SECS" "$3" --json | sed "s/^{/{\"tag\":\"$4\",/" >>"$results"
}

rows="4096:1 4096:40 65536:40 1048576:40 8388608:40"
modes="1:echo:push-pull 2:push:push-only 3:pull:pull-only"
[ $QUICK -eq 1 ] && rows="4096:1 65536:40 1048576:40"

echo "bench/run.sh: van $VAN, $REPEAT round(s) of $SECS s per measurement, results in $results" >&2
r=1
while [ $r -le "$REPEAT" ]; do
	for row in $rows; do
		size=${row%:*} keys=${row#*:}
		for m in $modes; do
			pm=${m%%:*} rm=$(echo "$m" | cut -d: -f2)
			echo "  round $r: $size B x $keys, $rm" >&2
			ref "$size" "$keys" "$rm" "ref:$size:$keys:$pm"
			pslite 1 1 "$size" "$keys" "$pm" "ps:$size:$keys:$pm" --seconds "$SECS"
			if [ "$keys" = 1 ]; then
				# the latency knob: the receive threads poll briefly after each message
				jobenv="PS_BUSY_POLL=1"
				pslite 1 1 "$size" "$keys" "$pm" "bp:$size:$keys:$pm" --seconds "$SECS"
				jobenv=
			fi
		done
	done
	# scaling: 2 servers + 4 workers against 1 + 1, push-pull
	for size in 65536 1048576; do
		echo "  round $r: scaling at $size B" >&2
		pslite 1 1 "$size" 40 1 "s11:$size" --seconds "$SECS"
		pslite 2 4 "$size" 20 1 "s24:$size" --seconds "$SECS"
	done
	r=$((r + 1))
done
echo "  idle nodes" >&2
pslite 1 1 4096 1 1 idle --idle $((SECS * 4))
jobenv="PS_BUSY_POLL=1"
pslite 1 1 4096 1 1 idlebp --idle $((SECS * 4))
jobenv=
echo "  a million messages" >&2
# 40 keys x 2 messages per iteration: 12500 iterations = 1,000,000 messages;
# the first line (and resident size) after 13 iterations = 1040 messages
jobenv="TOTAL_DURATION=12500 LOG_DURATION=13"
pslite 1 1 4096 40 1 mem
jobenv=

# ----------------------------------------------------------------- report --
val() { # val TAG TOOL KEY: the median of KEY over lines of TAG from TOOL
	grep "\"tag\":\"$1\"" "$results" | grep "\"tool\":\"$2\"" | jget "$3" | median
}
fmt() { awk -v x="$1" 'BEGIN { printf (x >= 10 ? "%.1f" : x >= 1 ? "%.2f" : "%.3f"), x }'; }

table=$work/table.md
plotdat=$work/plot.dat
{
	echo "| bytes per key | keys in flight | mode | raw TCP (Gbps) | pslite (Gbps) | pslite / raw | pslite p50 (us) | pslite p99 (us) | raw p50 (us) |"
	echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|"
} >"$table"
: >"$plotdat"
# table_row RUN LABEL: the row of pslite run RUN (ps, or bp for PS_BUSY_POLL=1)
# beside the reference of the same size, keys and mode; sets pg
table_row() {
	pg=$(val "$1:$size:$keys:$pm" pslite-bench goodput_gbps)
	p50=$(val "$1:$size:$keys:$pm" pslite-bench p50_us)
	p99=$(val "$1:$size:$keys:$pm" pslite-bench p99_us)
	ratio=$(awk -v a="$pg" -v b="$rg" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
	echo "| $size | $keys | $2 | $(fmt "$rg") | $(fmt "$pg") | $ratio | $(fmt "$p50") | $(fmt "$p99") | $(fmt "$r50") |" >>"$table"
}
for row in $rows; do
	size=${row%:*} keys=${row#*:}
	for m in $modes; do
		pm=${m%%:*} name=${m##*:}
		rg=$(val "ref:$size:$keys:$pm" tcp_ref goodput_gbps)
		r50=$(val "ref:$size:$keys:$pm" tcp_ref p50_us)
		table_row ps "$name"
		[ "$pm" = 1 ] && [ "$keys" != 1 ] && echo "$size $rg $pg" >>"$plotdat"
		[ "$keys" = 1 ] && table_row bp "$name, \`PS_BUSY_POLL=1\`"
	done
done

# scaling: goodput per core used = total worker goodput / (CPU seconds of all nodes / wall)
scale=$work/scale.md
{
	echo "| bytes per key | job | total goodput (Gbps) | cores used | Gbps per core | per core vs 1+1 |"
	echo "|---:|---|---:|---:|---:|---:|"
} >"$scale"
percore() { # percore TAG -> "goodput cores per_core" (medians over rounds)
	awk -v tag="\"tag\":\"$1\"" '
	index($0, tag) {
		match($0, /"goodput_gbps":[0-9.]+/); if (RSTART) { g = substr($0, RSTART + 15, RLENGTH - 15) + 0; gp += g }
		match($0, /"cpu_s":[0-9.]+/); if (RSTART) cpu += substr($0, RSTART + 8, RLENGTH - 8) + 0
		if ($0 ~ /"role":"worker"/) { match($0, /"wall_s":[0-9.]+/); w = substr($0, RSTART + 9, RLENGTH - 9) + 0; if (w > wall) wall = w }
	}
	END { if (wall > 0) printf "%.3f %.3f %.3f\n", gp / ROUNDS, cpu / wall / ROUNDS, (gp / ROUNDS) / (cpu / wall / ROUNDS) }' ROUNDS="$REPEAT" "$results"
}
for size in 65536 1048576; do
	set -- $(percore "s11:$size")
	b11=$3
	echo "| $size | 1 server + 1 worker | $(fmt "$1") | $(fmt "$2") | $(fmt "$3") | 1.00 |" >>"$scale"
	set -- $(percore "s24:$size")
	echo "| $size | 2 servers + 4 workers | $(fmt "$1") | $(fmt "$2") | $(fmt "$3") | $(awk -v a="$3" -v b="$b11" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') |" >>"$scale"
done

idle=$work/idle.md
{
	echo "| role | settings | CPU seconds | wall seconds | share of one core |"
	echo "|---|---|---:|---:|---:|"
	for t in idle idlebp; do
		set=default
		[ $t = idlebp ] && set='`PS_BUSY_POLL=1`'
		grep "\"tag\":\"$t\"" "$results" | grep pslite-bench-node | while read -r l; do
			role=$(echo "$l" | jget role); cpu=$(echo "$l" | jget cpu_s); wall=$(echo "$l" | jget wall_s)
			echo "| $role | $set | $cpu | $wall | $(awk -v c="$cpu" -v w="$wall" 'BEGIN { printf "%.3f%%", 100 * c / w }') |"
		done
	done
} >"$idle"

mem=$(grep '"tag":"mem"' "$results" | grep '"tool":"pslite-bench"')
memsrv=$(grep '"tag":"mem"' "$results" | grep '"role":"server"')
memline="worker resident size after the first $((40 * 2 * 13)) messages: $(echo "$mem" | jget rss_first_kb) KiB; after $(echo "$mem" | jget requests) messages: $(echo "$mem" | jget rss_end_kb) KiB. Server at the end: $(echo "$memsrv" | jget rss_kb) KiB (peak $(echo "$memsrv" | jget max_rss_kb) KiB)."

plot=
if command -v gnuplot >/dev/null 2>&1 && [ -s "$plotdat" ]; then
	plot=$top/docs/perf-$VAN.png
	[ $DOC -eq 1 ] || plot=$work/perf-$VAN.png
	gnuplot <<EOF || plot=
set terminal png size 800,480 noenhanced
set output "$plot"
set title "push-pull goodput, van $VAN, 40 keys in flight, loopback"
set logscale x 2
set xtics ("4 KiB" 4096, "16 KiB" 16384, "64 KiB" 65536, "256 KiB" 262144, "1 MiB" 1048576, "4 MiB" 4194304, "8 MiB" 8388608)
set yrange [0:*]
set xlabel "bytes per key"
set ylabel "Gbps"
set key left top
set grid
plot "$plotdat" using 1:2 with linespoints title "raw TCP echo (bench/tcp_ref)", \
     "$plotdat" using 1:3 with linespoints title "pslite-bench (mode 1)"
EOF
else
	echo "bench/run.sh: no plot (install gnuplot-nox)" >&2
fi

section=$work/section.md
{
	echo "<!-- bench/run.sh $VAN: begin (generated; do not edit by hand) -->"
	echo "### Van $VAN: pslite-bench beside raw TCP"
	echo
	echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores ($(uname -m)), $REPEAT round(s) of ${SECS} s each, medians;"
	echo "command: \`bench/run.sh --van $VAN --repeat $REPEAT --seconds $SECS\`${EXTRA_ENV:+ with \`$EXTRA_ENV\`}."
	echo "Goodput is counted as ps-lite's test_benchmark counts it (bytes per key x keys x iterations / time)."
	echo
	cat "$table"
	echo
	[ -n "$plot" ] && echo "![push-pull goodput, van $VAN](perf-$VAN.png)" && echo
	echo "Scaling (push-pull; cores used = CPU seconds of every node / wall time):"
	echo
	cat "$scale"
	echo
	echo "Idle nodes (\`pslite-bench --idle $((SECS * 4))\`, start-up included):"
	echo
	cat "$idle"
	echo
	echo "Memory: $memline"
	echo "<!-- bench/run.sh $VAN: end -->"
} >"$section"
cat "$section"

if [ $DOC -eq 1 ]; then
	doc=$top/docs/performance.md
	[ -f "$doc" ] || printf '# Performance\n\nHow fast pslite is, measured, with the commands that measured it.\n\n' >"$doc"
	if grep -q "<!-- bench/run.sh $VAN: begin" "$doc"; then
		awk -v van="$VAN" -v f="$section" '
		index($0, "<!-- bench/run.sh " van ": begin") { while ((getline l < f) > 0) print l; skip = 1; next }
		index($0, "<!-- bench/run.sh " van ": end") { skip = 0; next }
		!skip' "$doc" >"$work/doc" && cp "$work/doc" "$doc"
	else
		{ echo; cat "$section"; } >>"$doc"
	fi
	echo "bench/run.sh: wrote $doc" >&2
fi
