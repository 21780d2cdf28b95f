#!/bin/sh
# bench/goals.sh: issue 29's goals ("the round trip without thread
# hand-offs"), all measured in one run, each pslite case with
# PS_CALLER_PROGRESS=0 and =1 (every van here has the entry), beside its
# reference in the same round. 1 scheduler + 1 server + 1 worker on loopback.
#
#   bench/goals.sh [--repeat N] [--seconds S] [--port BASE] [--before DIR]
#                  [--keys "16 40 128"] [--steps N] [--from RUNS.LOG]
#
# Environment: PSL_BUILDDIR (default: the source tree, built in place).
#
#  1. one 4 KiB key push-pull (NUM_KEY_PER_SERVER=1), p50:
#     ucx shared memory (UCX_TLS=posix,sysv,cma,self) against ucx_perftest
#     -t ucp_am_lat -s 4096 over the same UCX_TLS (its latency is half a
#     round trip: the reference is twice its p50); ucx tcp (UCX_TLS=tcp) and
#     fabric tcp (FI_PROVIDER=tcp) against bench/tcp_ref 4096 1 S echo (raw
#     TCP, 1 in flight). Target: ratio <= 1.5.
#  2. 4 KiB push-pulls a second over ucx shared memory with
#     NUM_KEY_PER_SERVER in --keys (default 16 40 128); the rate is
#     pslite-bench's goodput / 4096 B. Target: >= 500,000.
#  3. bench/af.sh's AF step (pslite-afbench, StepMesh's shape) per van
#     (zmq, ucx with UCX_TLS=tcp, fabric with FI_PROVIDER=tcp): p99 / p50 of
#     each run, median. Target: <= 2.
#  4. van zmq, 40 keys in flight, 4 KiB, 64 KiB, 1 MiB, 8 MiB push-pull
#     goodput: against bench/tcp_ref SIZE 40 S echo (target >= 0.8), and
#     the default (off) against the van zmq of --before DIR (a build
#     directory of the tree before van zmq's caller progress, e.g. cfaa9e6;
#     its whole build: tools, core and plugins), target >= TOL.
#  5. 1 MiB and 8 MiB x 40 keys push-pull goodput on every van (zmq, ucx
#     tcp, ucx shared memory, fabric tcp): on against off, target >= TOL.
#
# A ratio is the median of the rounds' ratios (pslite and its reference
# ran back to back in each round), the measured and reference columns the
# medians of their values. --from RUNS.LOG prints the table again from a
# run's stderr (its "round R KEY: ..." lines) without measuring (give the
# same --keys and --before as that run).
#
# TOL (default 0.9) is what "unchanged" means here: this 2-core machine's
# round-to-round spread is larger than 5%. In each round the reference runs
# first, then off and on, in the opposite order every other round. Prints
# each run on stderr, then one markdown table of medians over the rounds.
# Every job runs under timeout(1); the script kills what it started.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
B=${PSL_BUILDDIR:-$top}
REPEAT=3
SECS=3
BASE=27400
BEFORE=
KEYS="16 40 128"
STEPS=
FROM=
TOL=${TOL:-0.9}
usage() {
	echo "usage: bench/goals.sh [--repeat N] [--seconds S] [--port BASE] [--before BUILDDIR] [--keys \"K ...\"] [--steps N] [--from RUNS.LOG]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || usage
	case $1 in
	--repeat) REPEAT=$2 ;;
	--seconds) SECS=$2 ;;
	--port) BASE=$2 ;;
	--before) BEFORE=$2 ;;
	--keys) KEYS=$2 ;;
	--steps) STEPS=$2 ;;
	--from) FROM=$2 ;;
	*) usage ;;
	esac
	shift 2
done
[ -n "$STEPS" ] || STEPS=$((SECS * 300))

[ -z "$FROM" ] || REPEAT=0
ME=bench/goals.sh
. "$here/goal_lib.sh"
[ -n "$FROM" ] || goal_need
if [ -n "$BEFORE" ] && [ -z "$FROM" ]; then
	if ! [ -x "$BEFORE/tools/pslite-bench" ] || ! [ -f "$BEFORE/plugins/van_zmq/.libs/van_zmq.so" ]; then
		echo "bench/goals.sh: --before $BEFORE: no pslite-bench or van_zmq.so there" >&2
		exit 2
	fi
fi
VP=$(vanpath "$B")
goal_work pslite-goals
T=$((SECS * 4 + 60)) # a job's limit

# psl BUILDDIR VAN SIZE KEYS CP [VAR=VALUE ...] -> "p50_us p99_us gbps"
psl() {
	b=$1 van=$2 size=$3 keys=$4 cp=$5
	shift 5
	vp=$VP
	[ "$b" = "$B" ] || vp=$(vanpath "$b")
	if env "$@" PS_VAN_PATH="$vp" PS_CALLER_PROGRESS="$cp" NUM_KEY_PER_SERVER="$keys" LOG_DURATION=10 \
		timeout -k 5 $T "$b/tools/pslite-run" -s 1 -w 1 --van "$van" --port "$(port)" --timeout $T -- \
		"$b/tools/pslite-bench" "$size" 1 1 --seconds "$SECS" --json --quiet >"$work/job.out" 2>&1; then
		l=$(grep '"tool":"pslite-bench"' "$work/job.out" | head -n 1)
		echo "$(field "$l" p50_us) $(field "$l" p99_us) $(field "$l" goodput_gbps)"
	else
		echo "bench/goals.sh: a pslite job failed ($van $size x $keys, PS_CALLER_PROGRESS=$cp $*):" >&2
		tail -n 5 "$work/job.out" >&2
		echo "- - -"
	fi
}
# tcpref SIZE WINDOW -> "p50_us p99_us gbps"
tcpref() {
	l=$(timeout -k 5 $T "$B/bench/tcp_ref" "$1" "$2" "$SECS" echo --json 2>/dev/null || true)
	echo "$(field "$l" p50_us) $(field "$l" p99_us) $(field "$l" goodput_gbps)"
}

# af VAN CP -> "p50_us p99_us"
af() {
	if UCX_TLS=tcp FI_PROVIDER=tcp PS_VAN_PATH="$VP" PS_CALLER_PROGRESS="$2" \
		timeout -k 5 $((T + 120)) "$B/tools/pslite-run" -s 1 -w 1 --van "$1" --port "$(port)" --timeout $((T + 120)) -- \
		"$B/tools/pslite-afbench" --steps "$STEPS" --json --quiet >"$work/af.out" 2>&1; then
		l=$(grep '"tool":"pslite-afbench"' "$work/af.out" | head -n 1)
		echo "$(field "$l" p50_us) $(field "$l" p99_us)"
	else
		echo "bench/goals.sh: an afbench job failed ($1, PS_CALLER_PROGRESS=$2):" >&2
		tail -n 5 "$work/af.out" >&2
		echo "- -"
	fi
}

col() { echo "$1" | awk -v c="$2" '{print $c}'; }
# offon KEYPREFIX CMD...: runs CMD with CP 0 and 1 (order alternating by
# round), stores the output as KEYPREFIX:0 and KEYPREFIX:1
offon() {
	k=$1
	shift
	if [ $((r % 2)) -eq 1 ]; then o="0 1"; else o="1 0"; fi
	for cp in $o; do put "$k:$cp" "$("$@" "$cp")"; done
}
shm=posix,sysv,cma,self
g1shm() { psl "$B" ucx 4096 1 "$1" UCX_TLS=$shm; }
g1ucx() { psl "$B" ucx 4096 1 "$1" UCX_TLS=tcp; }
g1fab() { psl "$B" fabric 4096 1 "$1" FI_PROVIDER=tcp; }
g2() { psl "$B" ucx 4096 "$K" "$1" UCX_TLS=$shm; }
g4() { psl "$B" zmq "$S" 40 "$1"; }
g5() { psl "$B" "$V" "$S" 40 "$1" "$E"; }
g3() { af "$V" "$1"; }

[ -n "$FROM" ] || echo "bench/goals.sh: $REPEAT round(s) of ~$SECS s, build $B${BEFORE:+, before $BEFORE}; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
r=1
while [ "$r" -le "$REPEAT" ]; do
	# goal 1
	put g1:shm:ref "$(amlat $shm)"
	offon g1:shm g1shm
	put g1:tcp:ref "$(tcpref 4096 1)"
	offon g1:ucxtcp g1ucx
	offon g1:fabtcp g1fab
	# goal 2
	for K in $KEYS; do offon "g2:$K" g2; done
	# goal 3
	for V in zmq ucx fabric; do offon "g3:$V" g3; done
	# goal 4 (zmq at 1 and 8 MiB is goal 5's zmq too)
	for S in 4096 65536 1048576 8388608; do
		put "g4:$S:ref" "$(tcpref "$S" 40)"
		[ -z "$BEFORE" ] || put "g4:$S:before" "$(psl "$BEFORE" zmq "$S" 40 0)"
		offon "g4:$S" g4
	done
	# goal 5
	for V in ucx-tcp ucx-shm fabric; do
		case $V in
		ucx-tcp) E=UCX_TLS=tcp ;;
		ucx-shm) E=UCX_TLS=$shm ;;
		fabric) E=FI_PROVIDER=tcp ;;
		esac
		for S in 1048576 8388608; do
			VV=$V
			V=${V%-*}
			offon "g5:$VV:$S" g5
			V=$VV
		done
	done
	r=$((r + 1))
done
if [ -n "$FROM" ]; then
	awk '$1 == "round" {k = $3; sub(/:$/, "", k); print k, $2, $4, $5, $6}' "$FROM" >"$res"
else
	echo "bench/goals.sh: done; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
fi

# the table
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b}'; }
met() { # met RATIO OP LIMIT
	awk -v x="$1" -v op="$2" -v l="$3" 'BEGIN {if (x == "-") print "-"; else if ((op == "<=" && x <= l) || (op == ">=" && x >= l)) print "met"; else print "**not met**"}'
}
row() { # row GOAL CASE MEASURED REFERENCE RATIO OP LIMIT
	echo "| $1 | $2 | $3 | $4 | $5 | $6 $7 | $(met "$5" "$6" "$7") |"
}
setting() { [ "$1" = 1 ] && echo "PS_CALLER_PROGRESS=1" || echo "off"; }
echo
echo "| goal | case | measured | reference | ratio | target | |"
echo "|---|---|---|---|---|---|---|"
for cp in 0 1; do
	a=$(median g1:shm:$cp 3) ref=$(median g1:shm:ref 3)
	row 1 "ucx shm, 1 x 4 KiB p50, $(setting $cp)" "$a us" "ucx_perftest ucp_am_lat round trip $ref us" "$(pratio g1:shm:$cp g1:shm:ref 3)" "<=" 1.5
done
ref=$(median g1:tcp:ref 3)
for t in ucxtcp:"ucx tcp" fabtcp:"fabric tcp"; do
	for cp in 0 1; do
		a=$(median "g1:${t%%:*}:$cp" 3)
		row 1 "${t#*:}, 1 x 4 KiB p50, $(setting $cp)" "$a us" "tcp_ref echo p50 $ref us" "$(pratio "g1:${t%%:*}:$cp" g1:tcp:ref 3)" "<=" 1.5
	done
done
for K in $KEYS; do
	for cp in 0 1; do
		g=$(median "g2:$K:$cp" 5)
		rate=$(awk -v g="$g" 'BEGIN {if (g == "-") print "-"; else printf "%.0f", g * 1e9 / 8 / 4096}')
		row 2 "ucx shm, $K x 4 KiB in flight, $(setting $cp)" "$rate /s" "500000 /s" "$(ratio "$rate" 500000)" ">=" 1
	done
done
for V in zmq ucx fabric; do
	for cp in 0 1; do
		# the median of each run's p99 / p50
		q=$(awk -v k="g3:$V:$cp" '$1 == k && $3 != "-" && $3 + 0 > 0 {print $4 / $3}' "$res" | sort -g |
			awk '{a[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) printf "%.2f", a[(NR + 1) / 2]; else printf "%.2f", (a[NR / 2] + a[NR / 2 + 1]) / 2}')
		row 3 "AF step, $V$([ $V = zmq ] || echo ' tcp'), $(setting $cp)" "p99 $(median "g3:$V:$cp" 4) us" "p50 $(median "g3:$V:$cp" 3) us" "$q" "<=" 2
	done
done
for S in 4096 65536 1048576 8388608; do
	ref=$(median "g4:$S:ref" 5)
	for cp in 0 1; do
		g=$(median "g4:$S:$cp" 5)
		row 4 "zmq, 40 x $S B, $(setting $cp)" "$g Gbps" "tcp_ref echo x 40 $ref Gbps" "$(pratio "g4:$S:$cp" "g4:$S:ref" 5)" ">=" 0.8
	done
	if [ -n "$BEFORE" ]; then
		g=$(median "g4:$S:0" 5) b=$(median "g4:$S:before" 5)
		row 4 "zmq, 40 x $S B, off against before" "$g Gbps" "before $b Gbps" "$(pratio "g4:$S:0" "g4:$S:before" 5)" ">=" "$TOL"
	fi
done
for V in zmq ucx-tcp ucx-shm fabric; do
	for S in 1048576 8388608; do
		if [ $V = zmq ]; then k=g4:$S; else k=g5:$V:$S; fi
		on=$(median "$k:1" 5) off=$(median "$k:0" 5)
		row 5 "$V$([ $V = fabric ] && echo ' tcp'), 40 x $S B, on against off" "$on Gbps" "off $off Gbps" "$(pratio "$k:1" "$k:0" 5)" ">=" "$TOL"
	done
done
