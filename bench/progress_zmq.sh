#!/bin/sh
# bench/progress_zmq.sh [ROUNDS] [SECONDS]: van zmq with PS_CALLER_PROGRESS=0
# and =1 alternately (1 scheduler + 1 server + 1 worker on loopback,
# pslite-bench push-pull), against bench/tcp_ref's echo in the same round:
# 1 key of 4 KiB, 40 keys of 4 KiB and 40 keys of 64 KiB in flight. Prints
# each run ("keys bytes setting p50_us Gbps rate/s"), then per case the
# medians: p50 (us), goodput (Gbps) and requests per second of off, on and
# raw TCP. Run from the build directory.
rounds=${1:-3}
secs=${2:-5}
[ -x tools/pslite-bench ] && [ -x bench/tcp_ref ] || { echo "$0: run it from the build directory" >&2; exit 2; }
PS_VAN_PATH=${PS_VAN_PATH:-$PWD/plugins/van_zmq/.libs}
export PS_VAN_PATH
out=$(mktemp "${TMPDIR:-/tmp}/progress-zmq.XXXXXX")
trap 'rm -f "$out"' EXIT
field() { echo "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"; }
# one run's line: keys bytes setting p50 Gbps requests/s (pslite-bench's
# requests, tcp_ref's messages, over the run's seconds)
record() {
	n=$(field "$4" requests)
	echo "$1 $2 $3 $(field "$4" p50_us) $(field "$4" goodput_gbps) $(awk -v n="${n:-$(field "$4" messages)}" \
		-v s="$secs" 'BEGIN { printf "%.0f", n / s }')" | tee -a "$out"
}
r=0
while [ "$r" -lt "$rounds" ]; do
	for c in "1 4096" "40 4096" "40 65536"; do
		set -- $c
		for cp in 0 1; do
			record "$1" "$2" "$cp" "$(PS_CALLER_PROGRESS=$cp NUM_KEY_PER_SERVER=$1 \
				timeout $((secs + 60)) tools/pslite-run -s 1 -w 1 --van zmq -- \
				tools/pslite-bench "$2" 1 1 --seconds "$secs" --json 2>&1 |
				grep '"tool":"pslite-bench",')"
		done
		record "$1" "$2" tcp "$(bench/tcp_ref "$2" "$1" "$secs" echo --json)"
	done
	r=$((r + 1))
done
# the median of column $4 for keys $1, bytes $2, setting $3
median() {
	awk -v k="$1" -v b="$2" -v c="$3" -v f="$4" '$1 == k && $2 == b && $3 == c && $f != "" { print $f }' "$out" |
		sort -n | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : 0) }'
}
echo "# keys x bytes | p50 us off / on / tcp | Gbps off / on / tcp | requests/s off / on / tcp"
for c in "1 4096" "40 4096" "40 65536"; do
	set -- $c
	echo "$1 x $2 | $(median "$1" "$2" 0 4) / $(median "$1" "$2" 1 4) / $(median "$1" "$2" tcp 4) |" \
		"$(median "$1" "$2" 0 5) / $(median "$1" "$2" 1 5) / $(median "$1" "$2" tcp 5) |" \
		"$(median "$1" "$2" 0 6) / $(median "$1" "$2" 1 6) / $(median "$1" "$2" tcp 6)"
done
