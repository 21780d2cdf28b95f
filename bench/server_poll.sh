#!/bin/sh
# bench/server_poll.sh: PS_BUSY_POLL's modes (0, auto, 1) on issue 29's
# goals 1-3 for vans ucx and fabric, all in one run, with
# PS_CALLER_PROGRESS=1 (the worker side drives its own round trip; what
# differs is how the server's progress thread waits between requests).
# 1 scheduler + 1 server + 1 worker on loopback.
#
#   bench/server_poll.sh [--rounds N] [--seconds S] [--modes "0 auto 1"]
#                        [--keys K] [--port BASE]
#
# Each round measures the references first (ucx_perftest -t ucp_am_lat
# -s 4096 over UCX shared memory, twice its p50; bench/tcp_ref 4096 1 S
# echo), then every mode, in an order rotated by one each round:
#   g1 shm / ucxtcp / fabtcp: one 4 KiB key push-pull p50 (us), over
#      UCX_TLS=posix,sysv,cma,self, UCX_TLS=tcp, FI_PROVIDER=tcp;
#   g2: K (40) 4 KiB keys in flight over UCX shared memory, push-pulls/s;
#   g3 ucx / fabric: pslite-afbench's AF step over tcp, p99 / p50.
# Prints each run on stderr, then a table of medians over the rounds (a
# ratio is the median of the rounds' ratios). Every job runs under
# timeout(1); the script kills what it started.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
B=${PSL_BUILDDIR:-$(cd "$here/.." && pwd)}
R=3 SECS=3 MODES="0 auto 1" K=40 BASE=27800
usage() { echo "usage: bench/server_poll.sh [--rounds N] [--seconds S] [--modes \"0 auto 1\"] [--keys K] [--port BASE]" >&2; exit 2; }
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || usage
	case $1 in
	--rounds) R=$2 ;;
	--seconds) SECS=$2 ;;
	--modes) MODES=$2 ;;
	--keys) K=$2 ;;
	--port) BASE=$2 ;;
	*) usage ;;
	esac
	shift 2
done
ME=bench/server_poll.sh
. "$here/goal_lib.sh"
goal_need
VP=$(vanpath "$B")
goal_work pslite-spoll
T=$((SECS * 4 + 60))

# job TOOL VAN MODE [VAR=VALUE...] -> the tool's JSON line ("" on failure)
job() {
	tool=$1 van=$2 mode=$3
	shift 3
	case $tool in
	bench) cmd="$B/tools/pslite-bench 4096 1 1 --seconds $SECS --json --quiet" ;;
	af) cmd="$B/tools/pslite-afbench --steps $((SECS * 300)) --json --quiet" ;;
	esac
	if env "$@" PS_VAN_PATH="$VP" PS_CALLER_PROGRESS=1 PS_BUSY_POLL="$mode" LOG_DURATION=10 \
		timeout -k 5 $((T + 120)) "$B/tools/pslite-run" -s 1 -w 1 --van "$van" --port "$(port)" \
		--timeout $((T + 120)) -- $cmd >"$work/job.out" 2>&1; then
		grep '"tool":"pslite-' "$work/job.out" | head -n 1
	else
		echo "bench/server_poll.sh: a job failed ($tool $van PS_BUSY_POLL=$mode $*):" >&2
		tail -n 5 "$work/job.out" >&2
	fi
}
p50() { l=$(job bench "$@"); field "$l" p50_us; }
rate() { l=$(job bench "$@"); g=$(field "$l" goodput_gbps); awk -v g="$g" 'BEGIN {if (g == "-") print "-"; else printf "%.0f", g * 1e9 / 8 / 4096}'; }
afq() { l=$(job af "$@"); a=$(field "$l" p50_us) b=$(field "$l" p99_us); awk -v a="$a" -v b="$b" 'BEGIN {if (a == "-" || b == "-" || a + 0 == 0) print "- - -"; else printf "%s %s %.2f\n", a, b, b / a}'; }
shm=posix,sysv,cma,self
echo "bench/server_poll.sh: $R round(s) of ~$SECS s, modes $MODES; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
r=1
while [ "$r" -le "$R" ]; do
	put ref:shm "$(amlat $shm)"
	l=$("$B/bench/tcp_ref" 4096 1 "$SECS" echo --json 2>/dev/null || true)
	put ref:tcp "$(field "$l" p50_us)"
	order=$(echo $MODES | awk -v r="$r" '{for (i = 0; i < NF; i++) printf "%s ", $((i + r - 1) % NF + 1)}')
	for m in $order; do
		put "g1:shm:$m" "$(p50 ucx "$m" UCX_TLS=$shm NUM_KEY_PER_SERVER=1)"
		put "g1:ucxtcp:$m" "$(p50 ucx "$m" UCX_TLS=tcp NUM_KEY_PER_SERVER=1)"
		put "g1:fabtcp:$m" "$(p50 fabric "$m" FI_PROVIDER=tcp NUM_KEY_PER_SERVER=1)"
		put "g2:$m" "$(rate ucx "$m" UCX_TLS=$shm NUM_KEY_PER_SERVER="$K")"
		put "g3:ucx:$m" "$(afq ucx "$m" UCX_TLS=tcp)"
		put "g3:fabric:$m" "$(afq fabric "$m" FI_PROVIDER=tcp)"
	done
	r=$((r + 1))
done
echo "bench/server_poll.sh: done; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo
echo "| goal | case | PS_BUSY_POLL | measured | reference | ratio | target |"
echo "|---|---|---|---|---|---|---|"
for m in $MODES; do
	echo "| 1 | ucx shm, 1 x 4 KiB p50 | $m | $(median g1:shm:$m) us | ucx_perftest round trip $(median ref:shm) us | $(pratio g1:shm:$m ref:shm) | <= 1.5 |"
done
for c in ucxtcp:"ucx tcp" fabtcp:"fabric tcp"; do
	for m in $MODES; do
		echo "| 1 | ${c#*:}, 1 x 4 KiB p50 | $m | $(median "g1:${c%%:*}:$m") us | tcp_ref echo $(median ref:tcp) us | $(pratio "g1:${c%%:*}:$m" ref:tcp) | <= 1.5 |"
	done
done
for m in $MODES; do
	g=$(median "g2:$m")
	echo "| 2 | ucx shm, $K x 4 KiB in flight | $m | $g /s | 500000 /s | $(awk -v g="$g" 'BEGIN {if (g == "-") print "-"; else printf "%.2f", g / 500000}') | >= 1 |"
done
for v in ucx fabric; do
	for m in $MODES; do
		echo "| 3 | AF step, $v tcp | $m | p99 $(median "g3:$v:$m" 4) us | p50 $(median "g3:$v:$m" 3) us | $(median "g3:$v:$m" 5) | <= 2 |"
	done
done
