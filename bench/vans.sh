#!/bin/sh
# bench/vans.sh: pslite-bench push-pull over van_ucx and van_fabric beside the
# transport's own tool (ucx_perftest, fi_pingpong), interleaved, on loopback.
#
#   bench/vans.sh [--repeat N] [--seconds S] [--sizes "4096 65536 ..."]
#                 [--only "ucx-tcp ucx-shm fabric-tcp"] [--busy]
#
# Environment: PSL_BUILDDIR (default: the source tree, built in place),
# EXTRA_ENV (extra variables for the pslite nodes, e.g. "PS_UCX_RX_CACHE_MB=0").
#
# Per transport and size, each round runs the tool, then pslite-bench
# (1 scheduler, 1 server, 1 worker, NUM_KEY_PER_SERVER=40 keys in flight,
# push-pull), and with --busy pslite-bench again with PS_BUSY_POLL=1; it
# prints one markdown table of medians, in Gbps (10^9 bit/s):
#   ucx:    ucx_perftest -t ucp_am_bw -s SIZE (one direction, both sides
#           polling), "overall" bandwidth;
#   fabric: fi_pingpong -p tcp -e rdm -m tagged -S SIZE (its MB/s halved: one
#           direction of a ping-pong), and the same at 40 x SIZE (one round's bytes in one
#           message), since libfabric-bin has no windowed bandwidth tool.
# For the TCP transports also bench/tcp_ref's echo (a raw TCP push-pull
# with the same 40 keys in flight: the kernel's TCP alone, no library).
# pslite-bench goodput counts each key's bytes once per round, as ps-lite's
# test_benchmark does, although a push-pull moves them twice.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
B=${PSL_BUILDDIR:-$top}
REPEAT=3
SECS=5
SIZES="4096 65536 1048576 8388608"
ONLY="ucx-tcp ucx-shm fabric-tcp"
BUSY=0
while [ $# -gt 0 ]; do
	case $1 in
	--repeat) REPEAT=$2; shift 2 ;;
	--seconds) SECS=$2; shift 2 ;;
	--sizes) SIZES=$2; shift 2 ;;
	--only) ONLY=$2; shift 2 ;;
	--busy) BUSY=1; shift ;;
	*) echo "usage: bench/vans.sh [--repeat N] [--seconds S] [--sizes \"BYTES ...\"] [--only \"ucx-tcp ucx-shm fabric-tcp\"] [--busy]" >&2
	   exit 2 ;;
	esac
done

for f in tools/pslite-run tools/pslite-bench; do
	[ -x "$B/$f" ] || { echo "bench/vans.sh: $B/$f is missing: build first (make), or set PSL_BUILDDIR" >&2; exit 2; }
done
vp=
for d in "$B"/plugins/*/.libs; do [ -d "$d" ] && vp=${vp:+$vp:}$d; done
export PS_VAN_PATH=${PS_VAN_PATH:-$vp}

work=$(mktemp -d "${TMPDIR:-/tmp}/pslite-vans.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
res=$work/res
: >"$res"
port=$((20000 + $$ % 20000))

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
iters() { # iterations for about SECS seconds at ~2 GB/s, at least 1000
	awk -v s="$1" -v t="$SECS" 'BEGIN {n = int(2e9 * t / s); if (n < 1000) n = 1000; if (n > 2000000) n = 2000000; print n}'
}

perftest() { # perftest TLS SIZE -> Gbps
	port=$((port + 1))
	n=$(iters "$2")
	UCX_TLS=$1 timeout $((SECS * 6 + 30)) ucx_perftest -t ucp_am_bw -s "$2" -n "$n" -p "$port" >"$work/pt.srv" 2>&1 &
	sleep 0.5
	UCX_TLS=$1 timeout $((SECS * 6 + 30)) ucx_perftest 127.0.0.1 -t ucp_am_bw -s "$2" -n "$n" -p "$port" \
		>"$work/pt.cli" 2>&1 || true
	wait 2>/dev/null || true
	# "Final: iters p50 avg overall bw_avg bw_overall ..." (MB/s = 2^20 B/s)
	awk '/^Final:/ {printf "%.3f\n", $7 * 1048576 * 8 / 1e9}' "$work/pt.cli"
}

pingpong() { # pingpong SIZE -> Gbps, one way
	port=$((port + 1))
	n=$(awk -v s="$1" 'BEGIN {n = int(4e8 / s); if (n < 20) n = 20; if (n > 20000) n = 20000; print n}')
	timeout $((SECS * 6 + 30)) fi_pingpong -p tcp -e rdm -m tagged -S "$1" -I "$n" -B "$port" >"$work/fp.srv" 2>&1 &
	sleep 0.5
	timeout $((SECS * 6 + 30)) fi_pingpong -p tcp -e rdm -m tagged -S "$1" -I "$n" -P "$port" 127.0.0.1 \
		>"$work/fp.cli" 2>&1 || true
	wait 2>/dev/null || true
	# "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec" (MB = 10^6);
	# MB/sec counts both directions of the ping-pong: halved to one
	awk 'NR > 1 && NF >= 8 {printf "%.3f\n", $6 * 8 / 1000 / 2}' "$work/fp.cli" | tail -n 1
}

echo_ref() { # echo_ref SIZE -> Gbps (raw TCP push-pull, 40 in flight)
	if [ -x "$B/bench/tcp_ref" ]; then
		"$B/bench/tcp_ref" "$1" 40 "$SECS" echo --json |
			sed -n 's/.*"goodput_gbps":\([0-9.]*\).*/\1/p' | head -n 1
	else
		echo "-"
	fi
}

bench() { # bench VAN SIZE [VAR=VALUE ...] -> Gbps
	van=$1 size=$2
	shift 2
	env ${EXTRA_ENV:-} "$@" NUM_KEY_PER_SERVER=40 LOG_DURATION=10 \
		"$B/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout $((SECS * 4 + 120)) -- \
		"$B/tools/pslite-bench" "$size" 1 1 --seconds "$SECS" --json --quiet >"$work/job.out" 2>&1 || {
		echo "bench/vans.sh: a pslite job failed ($van $size $*):" >&2
		tail -n 20 "$work/job.out" >&2
		echo 0
		return 0
	}
	sed -n 's/.*"goodput_gbps":\([0-9.]*\).*/\1/p' "$work/job.out" | head -n 1
}

put() { echo "$1 $2 $3" >>"$res"; }   # put KEY ROUND VALUE
get() { awk -v k="$1" '$1 == k {print $3}' "$res" | median; }

echo "bench/vans.sh: $REPEAT round(s) of ~$SECS s, sizes $SIZES, transports $ONLY" >&2
r=1
while [ $r -le "$REPEAT" ]; do
	for t in $ONLY; do
		for s in $SIZES; do
			case $t in
			ucx-tcp) tls=tcp ;;
			ucx-shm) tls=posix,sysv,cma,self ;;
			fabric-tcp) tls= ;;
			*) echo "bench/vans.sh: unknown transport $t" >&2; exit 2 ;;
			esac
			case $t in
			ucx-*)
				put "$t:$s:tool" $r "$(perftest "$tls" "$s")"
				[ "$t" = ucx-tcp ] && put "$t:$s:echo" $r "$(echo_ref "$s")"
				put "$t:$s:pslite" $r "$(bench ucx "$s" UCX_TLS="$tls")"
				[ $BUSY -eq 1 ] && put "$t:$s:busy" $r "$(bench ucx "$s" UCX_TLS="$tls" PS_BUSY_POLL=1)"
				;;
			fabric-*)
				put "$t:$s:tool" $r "$(pingpong "$s")"
				put "$t:$s:tool40" $r "$(pingpong $((s * 40)))"
				put "$t:$s:echo" $r "$(echo_ref "$s")"
				put "$t:$s:pslite" $r "$(bench fabric "$s" FI_PROVIDER=tcp)"
				[ $BUSY -eq 1 ] && put "$t:$s:busy" $r "$(bench fabric "$s" FI_PROVIDER=tcp PS_BUSY_POLL=1)"
				;;
			esac
			echo "  round $r $t $s: $(grep "^$t:$s:" "$res" | awk -v r=$r '$2 == r {printf "%s=%s ", $1, $3}')" >&2
		done
	done
	r=$((r + 1))
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b}'; }
echo
echo "| transport | size | tool Gbps | pslite push-pull Gbps | ratio |$([ $BUSY -eq 1 ] && echo ' PS_BUSY_POLL=1 | ratio |') raw TCP echo Gbps | pslite / echo |"
echo "|---|---|---|---|---|$([ $BUSY -eq 1 ] && echo '---|---|')---|---|"
for t in $ONLY; do
	for s in $SIZES; do
		tool=$(get "$t:$s:tool") p=$(get "$t:$s:pslite")
		line="| $t | $s | $tool | $p | $(ratio "$p" "$tool") |"
		[ $BUSY -eq 1 ] && { b=$(get "$t:$s:busy"); line="$line $b | $(ratio "$b" "$tool") |"; }
		e=$(get "$t:$s:echo")
		echo "$line $e | $(ratio "$p" "$e") |"
		case $t in fabric-*)
			t40=$(get "$t:$s:tool40")
			echo "| $t (tool at 40 x size) | $s | $t40 | $p | $(ratio "$p" "$t40") |$([ $BUSY -eq 1 ] && echo ' | |') | |" ;;
		esac
	done
done
