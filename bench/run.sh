#!/bin/sh
# bench/run.sh: pslite-bench beside a raw TCP reference, interleaved, several
# times, on loopback; writes a table and a plot into docs/performance.md.
#
#   bench/run.sh [--repeat N] [--seconds S] [--van NAME] [--quick] [--no-doc]
#                [--cxx PATH]
#
# Environment: PSL_BUILDDIR (default: the source tree, built in place),
# EXTRA_ENV (extra variables for the pslite nodes, e.g. "UCX_TLS=tcp"),
# PSLITE_CXX (as --cxx: a C++ ps-lite build's tests/test_benchmark, run in
# the same rounds over its ZeroMQ van; without it the tables and the plot
# show raw TCP and pslite only).
#
# What it measures (1 scheduler, 1 server, 1 worker unless said otherwise):
#   - push-pull, push-only and pull-only goodput and latency for
#     4 KiB x 1 key, 4 KiB / 64 KiB / 1 MiB / 8 MiB x 40 keys, beside
#     bench/tcp_ref (echo, push, pull) with the same number in flight;
#   - single-key push-pull latency (p50, p99) at 8 B, 4 KiB, 64 KiB and
#     1 MiB, by default and with PS_BUSY_POLL=1, beside tcp_ref's echo with
#     one message in flight (a raw TCP round trip);
#   - with --cxx, C++ ps-lite's test_benchmark at the same push-pull rows
#     (it prints goodput only: its time per request is derived from that);
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
CXX=${PSLITE_CXX:-}
while [ $# -gt 0 ]; do
	case $1 in
	--repeat) REPEAT=$2; shift 2 ;;
	--seconds) SECS=$2; shift 2 ;;
	--van) VAN=$2; shift 2 ;;
	--quick) QUICK=1; REPEAT=1; SECS=2; shift ;;
	--no-doc) DOC=0; shift ;;
	--cxx) CXX=$2; shift 2 ;;
	*) echo "usage: bench/run.sh [--repeat N] [--seconds S] [--van NAME] [--quick] [--no-doc] [--cxx PATH]" >&2; exit 2 ;;
	esac
done

for f in tools/pslite-run tools/pslite-bench bench/tcp_ref; do
	[ -x "$B/$f" ] || { echo "bench/run.sh: $B/$f is missing: build first (make), or set PSL_BUILDDIR" >&2; exit 2; }
done
[ -z "$CXX" ] || [ -x "$CXX" ] || { echo "bench/run.sh: --cxx $CXX is not an executable (a C++ ps-lite tests/test_benchmark)" >&2; exit 2; }
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

# cxx SIZE KEYS TAG: C++ ps-lite's test_benchmark, push-pull, 1 + 1 + 1 (its
# ZeroMQ van), for about SECS seconds; keeps the goodput of each of its
# intervals after the first (start-up) as a line {"tag":TAG,"tool":"cxx",...}
cxx() {
	out=$work/cxx.out
	every=5
	[ "$2" = 1 ] && every=50
	env DMLC_NODE_HOST=127.0.0.1 DMLC_GROUP_SIZE=1 NUM_KEY_PER_SERVER="$2" \
		LOG_DURATION=$every TOTAL_DURATION=100000000 \
		"$B/tools/pslite-run" -s 1 -w 1 --van zmq --timeout $((SECS + 10)) -- \
		"$CXX" "$1" 1 1 >"$out" 2>&1 || true # ended by --timeout
	sed -n 's/.*Application goodput: \([0-9.e+-]*\) Gbps.*/\1/p' "$out" | sed 1d |
		sed "s/^\(.*\)$/{\"tag\":\"$3\",\"tool\":\"cxx\",\"goodput_gbps\":\1}/" >>"$results"
}

ref() { # ref SIZE WINDOW MODE TAG
	"$B/bench/tcp_ref" "$1" "$2" "$SECS" "$3" --json | sed "s/^{/{\"tag\":\"$4\",/" >>"$results"
}

rows="4096:1 4096:40 65536:40 1048576:40 8388608:40"
modes="1:echo:push-pull 2:push:push-only 3:pull:pull-only"
[ $QUICK -eq 1 ] && rows="4096:1 65536:40 1048576:40"
# single-key latency: push-pull at these sizes (4096 x 1 is among the rows)
lat="8 4096 65536 1048576"

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
		[ -n "$CXX" ] && [ "$keys" != 1 ] && echo "  round $r: $size B x $keys, C++ ps-lite" >&2 &&
			cxx "$size" "$keys" "cxx:$size:$keys"
	done
	for size in $lat; do
		case " $rows " in *" $size:1 "*) ;; *)
			echo "  round $r: $size B x 1, echo" >&2
			ref "$size" 1 echo "ref:$size:1:1"
			pslite 1 1 "$size" 1 1 "ps:$size:1:1" --seconds "$SECS"
			jobenv="PS_BUSY_POLL=1"
			pslite 1 1 "$size" 1 1 "bp:$size:1:1" --seconds "$SECS"
			jobenv=
			;;
		esac
		[ -n "$CXX" ] && echo "  round $r: $size B x 1, C++ ps-lite" >&2 && cxx "$size" 1 "cxx:$size:1"
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

# cxxval SIZE KEYS: C++ ps-lite's median goodput (Gbps), or ? when not run
cxxval() {
	c=$(val "cxx:$1:$2" cxx goodput_gbps)
	if [ -n "$CXX" ] && [ "$c" != 0 ]; then echo "$c"; else echo "?"; fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# single-key latency: pslite (default, PS_BUSY_POLL=1) beside a raw TCP round
# trip; C++ ps-lite's time per request is bytes x 8 / its goodput (a mean)
lattable=$work/lat.md
latdat=$work/lat.dat
{
	printf '| bytes | raw TCP p50 (us) | raw p99 (us) | pslite p50 (us) | pslite p99 (us) | pslite / raw (p50) | `PS_BUSY_POLL=1` p50 (us) | `PS_BUSY_POLL=1` p99 (us) | `PS_BUSY_POLL=1` / raw (p50) |'
	[ -n "$CXX" ] && printf ' C++ ps-lite mean (us) | C++ ps-lite / raw |'
	echo
	printf '|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
	[ -n "$CXX" ] && printf -- '---:|---:|'
	echo
} >"$lattable"
: >"$latdat"
for size in $lat; do
	r50=$(val "ref:$size:1:1" tcp_ref p50_us) r99=$(val "ref:$size:1:1" tcp_ref p99_us)
	p50=$(val "ps:$size:1:1" pslite-bench p50_us) p99=$(val "ps:$size:1:1" pslite-bench p99_us)
	b50=$(val "bp:$size:1:1" pslite-bench p50_us) b99=$(val "bp:$size:1:1" pslite-bench p99_us)
	c=$(cxxval "$size" 1) cus="?"
	[ "$c" = "?" ] || cus=$(awk -v b="$size" -v g="$c" 'BEGIN { printf "%.1f", b * 8 / (g * 1e3) }')
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |' "$size" "$(fmt "$r50")" "$(fmt "$r99")" \
		"$(fmt "$p50")" "$(fmt "$p99")" "$(ratio "$p50" "$r50")" \
		"$(fmt "$b50")" "$(fmt "$b99")" "$(ratio "$b50" "$r50")" >>"$lattable"
	[ -n "$CXX" ] && printf ' %s | %s |' "$cus" "$( [ "$cus" = "?" ] && echo "?" || ratio "$cus" "$r50")" >>"$lattable"
	echo >>"$lattable"
	echo "$size $r50 $p50 $b50 $cus" >>"$latdat"
done

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
		[ "$pm" = 1 ] && [ "$keys" != 1 ] && echo "$size $rg $pg $(cxxval "$size" "$keys")" >>"$plotdat"
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

plot= latplot=
cxxnote=", C++ ps-lite not given (--cxx)"
cxxplot=
[ -n "$CXX" ] && cxxnote= && cxxplot=", \"$plotdat\" using 1:4 with linespoints title \"C++ ps-lite test_benchmark (ZeroMQ)\""
cxxlat=
[ -n "$CXX" ] && cxxlat=", \"$latdat\" using 1:5 with linespoints title \"C++ ps-lite (mean: bytes x 8 / goodput)\""
if command -v gnuplot >/dev/null 2>&1 && [ -s "$latdat" ]; then
	latplot=$top/docs/perf-$VAN-latency.png
	[ $DOC -eq 1 ] || latplot=$work/perf-$VAN-latency.png
	gnuplot <<EOF || { rm -f "$latplot"; latplot=; }
set terminal png size 800,480 noenhanced
set output "$latplot"
set title "one key push-pull, van $VAN, loopback: p50 round trip$cxxnote"
set datafile missing "?"
set logscale xy
set xtics ("8 B" 8, "64 B" 64, "512 B" 512, "4 KiB" 4096, "64 KiB" 65536, "1 MiB" 1048576)
set xlabel "bytes"
set ylabel "us per request"
set key left top
set grid
plot "$latdat" using 1:2 with linespoints title "raw TCP round trip (bench/tcp_ref, 1 in flight)", \
     "$latdat" using 1:3 with linespoints title "pslite-bench", \
     "$latdat" using 1:4 with linespoints title "pslite-bench, PS_BUSY_POLL=1"$cxxlat
EOF
fi
if command -v gnuplot >/dev/null 2>&1 && [ -s "$plotdat" ]; then
	plot=$top/docs/perf-$VAN.png
	[ $DOC -eq 1 ] || plot=$work/perf-$VAN.png
	gnuplot <<EOF || { rm -f "$plot"; plot=; }
set terminal png size 800,480 noenhanced
set output "$plot"
set title "push-pull goodput, van $VAN, 40 keys in flight, loopback$cxxnote"
set datafile missing "?"
set logscale x 2
set xtics ("4 KiB" 4096, "16 KiB" 16384, "64 KiB" 65536, "256 KiB" 262144, "1 MiB" 1048576, "4 MiB" 4194304, "8 MiB" 8388608)
set yrange [0:*]
set xlabel "bytes per key"
set ylabel "Gbps"
set key left top
set grid
plot "$plotdat" using 1:2 with linespoints title "raw TCP echo (bench/tcp_ref)", \
     "$plotdat" using 1:3 with linespoints title "pslite-bench (mode 1)"$cxxplot
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
	opts="--repeat $REPEAT --seconds $SECS"
	[ $QUICK -eq 1 ] && opts=--quick
	echo "command: \`bench/run.sh --van $VAN $opts${CXX:+ --cxx $CXX}\`${EXTRA_ENV:+ with \`$EXTRA_ENV\`}."
	echo "Goodput is counted as ps-lite's test_benchmark counts it (bytes per key x keys x iterations / time)."
	echo
	cat "$table"
	echo
	[ -n "$plot" ] && echo "![push-pull goodput, van $VAN](perf-$VAN.png)" && echo
	if [ -n "$CXX" ]; then
		echo "C++ ps-lite (its tests/test_benchmark over its ZeroMQ van, 1 + 1 + 1, the same rounds), push-pull goodput (Gbps):"
		echo
		echo "| bytes per key | keys in flight | C++ ps-lite (Gbps) | pslite / C++ ps-lite |"
		echo "|---:|---:|---:|---:|"
		for row in $rows; do
			size=${row%:*} keys=${row#*:}
			[ "$keys" = 1 ] && continue
			c=$(cxxval "$size" "$keys")
			echo "| $size | $keys | $( [ "$c" = "?" ] && echo "?" || fmt "$c") | $( [ "$c" = "?" ] && echo "?" || ratio "$(val "ps:$size:$keys:1" pslite-bench goodput_gbps)" "$c") |"
		done
		echo
	else
		echo "No C++ ps-lite in this run (give one with \`--cxx PATH\` to its tests/test_benchmark)."
		echo
	fi
	echo "One key, push-pull: p50 and p99 per request beside a raw TCP round trip (\`bench/tcp_ref BYTES 1 S echo\`, one message in flight)${CXX:+; C++ ps-lite prints goodput only, so its column is a mean, bytes x 8 / goodput}:"
	echo
	cat "$lattable"
	echo
	[ -n "$latplot" ] && echo "![one key push-pull p50, van $VAN](perf-$VAN-latency.png)" && echo
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
