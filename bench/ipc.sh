#!/bin/sh
# bench/ipc.sh: BYTEPS_ENABLE_IPC=1 against the van between processes of one
# host, beside memcpy. Two hosts' worth of co-located pairs as ps-lite's
# test_ipc_benchmark runs them (2 servers and 2 workers, here all on this
# machine), pslite-bench push-pull with that program's arguments (the value
# length first; NUM_KEY_PER_SERVER keys per server, default 10), data checked.
#
#   bench/ipc.sh [--seconds S] [--sizes "1048576 4194304"] [--van zmq] [--rounds N]
#
# Prints one line per run and a table of medians: goodput (Gbps, as
# test_ipc_benchmark counts it: bytes pushed and pulled once per key and
# iteration) with IPC, through the van, and bench/memcpy_ref's bandwidth.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
B=${PSL_BUILDDIR:-$top}
SECS=5
SIZES="1048576 4194304"
VAN=zmq
ROUNDS=3
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) SECS=$2; shift 2 ;;
	--sizes) SIZES=$2; shift 2 ;;
	--van) VAN=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	*) echo "usage: bench/ipc.sh [--seconds S] [--sizes \"B...\"] [--van NAME] [--rounds N]" >&2; exit 2 ;;
	esac
done
vp=
for d in "$B"/plugins/*/.libs; do [ -d "$d" ] && vp=${vp:+$vp:}$d; done
export PS_VAN_PATH=$vp NUM_KEY_PER_SERVER=${NUM_KEY_PER_SERVER:-10}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # ipc size -> goodput in Gbps (the workers' sum)
	BYTEPS_ENABLE_IPC=$1 PS_IPC_BUF_MB=${PS_IPC_BUF_MB:-256} timeout 300 "$B/tools/pslite-run" \
		-s 2 -w 2 --van "$VAN" -- "$B/tools/pslite-bench" "$2" 1 1 --seconds "$SECS" >"$out" 2>&1 || {
		echo "bench/ipc.sh: the job failed:" >&2; tail -n 20 "$out" >&2; exit 1; }
	grep -c "0 errors, data checked" "$out" | grep -q '^2$' || {
		echo "bench/ipc.sh: data not checked:" >&2; tail -n 20 "$out" >&2; exit 1; }
	sed -n 's/.*pslite-bench summary: .*goodput \([0-9.]*\) Gbps.*/\1/p' "$out" |
		awk '{s += $1} END {printf "%.2f", s}'
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
printf '| value bytes | IPC (Gbps) | van %s (Gbps) | IPC / van | memcpy (Gbps) | IPC / memcpy |\n' "$VAN"
printf '|---|---|---|---|---|---|\n'
for size in $SIZES; do
	ipc= van= mc=
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		i=$(run 1 "$size"); v=$(run 0 "$size")
		m=$("$B/bench/memcpy_ref" "$size" 1 | sed -n 's/.*(\([0-9.]*\) Gbps).*/\1/p')
		echo "# size $size round $r: ipc $i van $v memcpy $m Gbps" >&2
		ipc="$ipc $i"; van="$van $v"; mc="$mc $m"
		r=$((r + 1))
	done
	ipc=$(echo "$ipc" | median); van=$(echo "$van" | median); mc=$(echo "$mc" | median)
	printf '| %s | %s | %s | %.2f | %s | %.2f |\n' "$size" "$ipc" "$van" \
		"$(echo "$ipc $van" | awk '{print $1 / $2}')" "$mc" "$(echo "$ipc $mc" | awk '{print $1 / $2}')"
done
