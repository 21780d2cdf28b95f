#!/bin/sh
# bench/af.sh: the AF step latency (pslite-afbench, 1 attention worker x 1 FFN
# server, StepMesh's default shape) over each built TCP-capable van beside
# bench/tcp_ref moving the same bytes, on loopback.
#
#   bench/af.sh [--steps N] [--rounds N] [--vans "zmq ucx fabric"]
#
# A step sends 3 micro-batches of 458,752 B and gets 917,504 B back for each:
# 4,128,768 B over the connection. The references move the same bytes with
# bench/tcp_ref's echo: 3 messages of 688,128 B in flight (3 x 2 x 688,128 B;
# the round trip of one message with 3 in flight is the time of a step), and
# one message of 2,064,384 B echoed whole (window 1). Prints one JSON line per
# run and a table of medians over the rounds.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
B=${PSL_BUILDDIR:-$top}
STEPS=1000
ROUNDS=3
VANS="zmq ucx fabric"
while [ $# -gt 0 ]; do
	case $1 in
	--steps) STEPS=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--vans) VANS=$2; shift 2 ;;
	*) echo "usage: bench/af.sh [--steps N] [--rounds N] [--vans \"zmq ucx fabric\"]" >&2; exit 2 ;;
	esac
done
vp=
for d in "$B"/plugins/*/.libs; do [ -d "$d" ] && vp=${vp:+$vp:}$d; done
export PS_VAN_PATH=${PS_VAN_PATH:-$vp}
work=$(mktemp -d "${TMPDIR:-/tmp}/pslite-afb.XXXXXX")
trap 'rm -rf "$work"' EXIT
res=$work/res
: >"$res"
secs=$(awk "BEGIN {print ($STEPS / 200 > 2) ? $STEPS / 200 : 2}")
r=0
while [ $r -lt "$ROUNDS" ]; do
	r=$((r + 1))
	"$B/bench/tcp_ref" 688128 3 "$secs" echo --json | sed 's/^{/{"tag":"tcp_ref echo 688128 x3",/' | tee -a "$res"
	"$B/bench/tcp_ref" 2064384 1 "$secs" echo --json | sed 's/^{/{"tag":"tcp_ref echo 2064384 x1",/' | tee -a "$res"
	for v in $VANS; do
		[ -n "$(ls "$B"/plugins/van_"$v"/.libs/van_"$v".so 2>/dev/null)" ] || continue
		UCX_TLS=tcp FI_PROVIDER=tcp "$B/tools/pslite-run" -s 1 -w 1 --van "$v" --timeout 300 -- \
			"$B/tools/pslite-afbench" --steps "$STEPS" --json --quiet 2>/dev/null |
			grep '"tool":"pslite-afbench"' | sed "s/^\[worker 0\] //; s/^{/{\"tag\":\"afbench $v\",/" |
			tee -a "$res"
	done
done
echo
echo "| run | p50 us | p99 us | (medians of $ROUNDS rounds) |"
echo "|---|---|---|---|"
for tag in $(sed 's/^{"tag":"\([^"]*\)".*/\1/' "$res" | sort -u | tr ' ' '+'); do
	t=$(echo "$tag" | tr '+' ' ')
	p50=$(grep "\"tag\":\"$t\"" "$res" | sed 's/.*"p50_us":\([0-9.]*\).*/\1/' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	p99=$(grep "\"tag\":\"$t\"" "$res" | sed 's/.*"p99_us":\([0-9.]*\).*/\1/' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	echo "| $t | $p50 | $p99 | |"
done
