#!/bin/bash
# bench/rdma_vm.sh: RDMA figures from the soft-RoCE test VM (docs/rdma-vm.md),
# all in ONE boot: the verbs tools and pslite's vans over the same rxe0.
#
#   bench/rdma_vm.sh [--seconds S] [--sizes "4096 65536 1048576"] [--van "ucx fabric ibverbs"]
#
# Per size, in Gbps (10^9 bit/s):
#   ib_write_bw     perftest, one QP, --report_gbits, average bandwidth
#   ucx_perftest    -t ucp_am_bw over UCX_TLS=rc_verbs,ud_verbs,self (the
#                   "overall" bandwidth, one direction)
#   fi_pingpong     -p 'verbs;ofi_rxm' -e rdm: its MB/s halved (one direction
#                   of a ping-pong)
#   pslite VAN      pslite-bench push-pull, 1 server, 1 worker, 40 keys in
#                   flight (as bench/vans.sh); goodput counts each key once
#                   per round. van ibverbs is run when van_ibverbs.so is built
#                   ("-" otherwise); a job that fails or hangs prints "fail".
# Everything is emulated (TCG): compare columns within one run, never with
# other machines. Needs the VM (tests/vm/prepare.sh) and a built tree
# (PSL_BUILDDIR, default: the source tree built in place).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
B=${PSL_BUILDDIR:-$top}
SECS=3
SIZES="4096 65536 1048576"
VANS="ucx fabric ibverbs"
args=("$@")
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) SECS=$2; shift 2 ;;
	--sizes) SIZES=$2; shift 2 ;;
	--van) VANS=$2; shift 2 ;;
	--in-vm) IN_VM=1; shift ;;
	*) echo "usage: bench/rdma_vm.sh [--seconds S] [--sizes \"BYTES ...\"] [--van \"ucx fabric ibverbs\"]" >&2
	   exit 2 ;;
	esac
done

if [ -z "${IN_VM:-}" ]; then
	for f in tools/pslite-run tools/pslite-bench; do
		[ -x "$B/$f" ] || { echo "bench/rdma_vm.sh: $B/$f is missing: build first (make), or set PSL_BUILDDIR" >&2; exit 2; }
	done
	n=$(echo $SIZES | wc -w)
	export PSL_BUILDDIR=$B
	exec "$top/tests/vm/run.sh" --timeout $((n * (SECS + 80) * 6 + 120)) --rw "$B" -- \
		"$0" "${args[@]}" --in-vm
fi

vp=
for d in "$B"/plugins/*/.libs; do [ -d "$d" ] && vp=${vp:+$vp:}$d; done
export PS_VAN_PATH=${PS_VAN_PATH:-$vp}
ip=10.0.2.15
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1 # tools may leave files (fi_pingpong: *.btr) in their directory
port=$((20000 + $$ % 20000))
# the traps of docs/rdma-vm.md
export UCX_IB_GID_INDEX=0 FI_UNIVERSE_SIZE=16
lim=$((SECS * 6 + 60))

pair() { # pair SERVER... -- CLIENT...: server, 3 s, client; client's output in $work/cli
	local srv=()
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	timeout -k 5 $lim "${srv[@]}" >"$work/srv" 2>&1 &
	sleep 3
	timeout -k 5 $lim "$@" >"$work/cli" 2>&1
	wait 2>/dev/null
}
num() { awk '{ if ($1 ~ /^[0-9.]+$/ && $1 > 0) print $1; else print "fail" }' <<<"${1:-x}"; }

writebw() { # SIZE
	# iterations for about SECS s at 30 MB/s (-D gave 0 iterations at 1 MiB)
	local n=$(awk -v s="$1" -v t="$SECS" 'BEGIN {n = int(30e6 * t / s); if (n < 200) n = 200; print n}')
	pair ib_write_bw -d rxe0 -x 0 -F -n "$n" -s "$1" --report_gbits -- \
		ib_write_bw -d rxe0 -x 0 -F -n "$n" -s "$1" --report_gbits $ip
	# "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]"
	num "$(awk -v s="$1" '$1 == s && NF >= 5 {printf "%.3f", $4}' "$work/cli")"
}
perftest() { # SIZE
	port=$((port + 1))
	local n=$(awk -v s="$1" -v t="$SECS" 'BEGIN {n = int(40e6 * t / s); if (n < 200) n = 200; print n}')
	UCX_TLS=rc_verbs,ud_verbs,self pair ucx_perftest -t ucp_am_bw -s "$1" -n "$n" -p $port -- \
		ucx_perftest $ip -t ucp_am_bw -s "$1" -n "$n" -p $port
	# "Final: iters p50 avg overall bw_avg bw_overall ..." (MB/s = 2^20 B/s)
	num "$(awk '/^Final:/ {printf "%.3f", $7 * 1048576 * 8 / 1e9}' "$work/cli")"
}
pingpong() { # SIZE
	port=$((port + 1))
	local n=$(awk -v s="$1" -v t="$SECS" 'BEGIN {n = int(20e6 * t / s); if (n < 50) n = 50; if (n > 20000) n = 20000; print n}')
	pair fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S "$1" -I "$n" -B $port -- \
		fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S "$1" -I "$n" -P $port $ip
	# "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec" (MB = 10^6),
	# both directions: halved
	num "$(awk 'NR > 1 && NF >= 8 {v = $6} END {if (v != "") printf "%.3f", v * 8 / 1000 / 2}' "$work/cli")"
}
pslite() { # VAN SIZE [VAR=VALUE...]
	local van=$1 size=$2
	shift 2
	env "$@" NUM_KEY_PER_SERVER=40 LOG_DURATION=10 \
		"$B/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout $((SECS * 4 + 80)) -- \
		"$B/tools/pslite-bench" "$size" 1 1 --seconds "$SECS" --json --quiet >"$work/job" 2>&1
	num "$(sed -n 's/.*"goodput_gbps":\([0-9.]*\).*/\1/p' "$work/job" | head -n 1)"
}

declare -A R dead
t0=$(date +%s)
for s in $SIZES; do
	R[wbw:$s]=$(writebw "$s")
	R[ucxpt:$s]=$(perftest "$s")
	R[fipp:$s]=$(pingpong "$s")
	for v in $VANS; do
		if [ "$v" = ibverbs ] && ! ls "$B"/plugins/van_ibverbs/.libs/van_ibverbs.so >/dev/null 2>&1; then
			R[$v:$s]=-
			continue
		fi
		if [ "${dead[$v]:-}" ]; then # it hung at a smaller size
			R[$v:$s]=fail
			continue
		fi
		case $v in
		ucx) R[$v:$s]=$(pslite ucx "$s" UCX_TLS=rc_verbs,ud_verbs,self) ;;
		fabric) R[$v:$s]=$(pslite fabric "$s" FI_PROVIDER=verbs) ;;
		*) R[$v:$s]=$(pslite "$v" "$s") ;;
		esac
		if [ "${R[$v:$s]}" = fail ]; then
			echo "bench/rdma_vm.sh: pslite over $v at $s bytes failed:" >&2
			tail -n 5 "$work/job" >&2
			grep -q 'ran past --timeout' "$work/job" && dead[$v]=1
		fi
	done
	echo "bench/rdma_vm.sh: $s bytes done ($(($(date +%s) - t0)) s)" >&2
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b + 0 == 0) print "-"; else printf "%.2f", a / b}'; }
echo
echo "RDMA test VM, $(date -u +%Y-%m-%d), one boot, emulated (TCG, soft-RoCE rxe0): ratios only; Gbps"
echo
hdr="| size | ib_write_bw | ucx_perftest rc_verbs | fi_pingpong verbs;ofi_rxm |"
sep="|---|---|---|---|"
for v in $VANS; do hdr="$hdr pslite $v | $v / ib_write_bw |"; sep="$sep---|---|"; done
echo "$hdr"
echo "$sep"
for s in $SIZES; do
	line="| $s | ${R[wbw:$s]} | ${R[ucxpt:$s]} | ${R[fipp:$s]} |"
	for v in $VANS; do line="$line ${R[$v:$s]} | $(ratio "${R[$v:$s]}" "${R[wbw:$s]}") |"; done
	echo "$line"
done
