#!/bin/sh
# bench/progress_fabric.sh [ROUNDS] [SECONDS]: bench/progress.sh's runs over
# van fabric (FI_PROVIDER=tcp, loopback, 1 scheduler + 1 server + 1 worker):
# pslite-bench push-pull of 4 KiB keys, 1 and 40 in flight, with
# PS_CALLER_PROGRESS=0 and =1 alternately, and in each round bench/tcp_ref's
# 4 KiB echo with 1 and 40 in flight. Prints each run, then per case the
# median p50 (us) and goodput (Gbps): off, on, raw TCP, and on / raw TCP.
# Run from the build directory.
rounds=${1:-3}
secs=${2:-5}
[ -x tools/pslite-bench ] && [ -x bench/tcp_ref ] || { echo "$0: run it from the build directory" >&2; exit 2; }
PS_VAN_PATH=${PS_VAN_PATH:-$PWD/plugins/van_fabric/.libs}
FI_PROVIDER=${FI_PROVIDER:-tcp}
export PS_VAN_PATH FI_PROVIDER
out=$(mktemp "${TMPDIR:-/tmp}/progress-fabric.XXXXXX")
trap 'rm -f "$out"' EXIT
field() { echo "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"; }
r=0
while [ "$r" -lt "$rounds" ]; do
	for keys in 1 40; do
		for cp in 0 1; do
			line=$(PS_CALLER_PROGRESS=$cp NUM_KEY_PER_SERVER=$keys \
				timeout $((secs + 60)) tools/pslite-run -s 1 -w 1 --van fabric -- \
				tools/pslite-bench 4096 1 1 --seconds "$secs" --json 2>&1 |
				grep '"tool":"pslite-bench",')
			echo "$keys $cp $(field "$line" p50_us) $(field "$line" goodput_gbps)" | tee -a "$out"
		done
		line=$(bench/tcp_ref 4096 "$keys" "$secs" echo --json)
		echo "$keys tcp $(field "$line" p50_us) $(field "$line" goodput_gbps)" | tee -a "$out"
	done
	r=$((r + 1))
done
echo "# keys | p50 off | p50 on | p50 tcp | on/tcp | Gbps off | Gbps on | Gbps tcp | on/tcp"
for keys in 1 40; do
	for c in 0 1 tcp; do
		p=$(awk -v k="$keys" -v c="$c" '$1 == k && $2 == c && $3 != "" { print $3 }' "$out" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
		g=$(awk -v k="$keys" -v c="$c" '$1 == k && $2 == c && $4 != "" { print $4 }' "$out" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
		eval "p_$c=\${p:-0} g_$c=\${g:-0}"
	done
	awk -v k="$keys" -v p0="$p_0" -v p1="$p_1" -v pt="$p_tcp" -v g0="$g_0" -v g1="$g_1" -v gt="$g_tcp" 'BEGIN {
		printf "%s | %.1f | %.1f | %.1f | %.2f | %.3f | %.3f | %.3f | %.2f\n", k, p0, p1, pt, pt ? p1 / pt : 0, g0, g1, gt, gt ? g1 / gt : 0 }'
done
