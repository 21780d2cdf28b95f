#!/bin/sh
# bench/progress_ibverbs.sh [ROUNDS] [SECONDS]: bench/progress_fabric.sh's
# runs over van ibverbs, in the soft-RoCE test VM (one boot, tests/vm/run.sh;
# docs/rdma-vm.md): 1 scheduler + 1 server + 1 worker on the guest's address
# (rxe0), pslite-bench push-pull of 4 KiB keys, 1 and 40 in flight, with
# PS_CALLER_PROGRESS=0 and =1 alternately. Prints each run, then per case the
# median p50 (us), goodput (Gbps) and requests of each setting, on / off of
# those medians, and the median of each round's own on / off (the pairs ran
# back to back: less of the host's load drift). Emulated (qemu TCG): only
# ratios within one run mean anything. Run from the build directory (default
# 5 rounds of 3 s: 2 to 3 minutes of VM, boot included).
rounds=${1:-5}
secs=${2:-3}
[ -x tools/pslite-bench ] || { echo "$0: run it from the build directory" >&2; exit 2; }
if [ -z "${PSL_PROGRESS_IN_VM:-}" ]; then
	src=$(cd "$(dirname "$0")/.." && pwd)
	export PSL_PROGRESS_IN_VM=1
	exec flock -w 2400 "${TMPDIR:-/tmp}/pslite-vm-tests.lock" "$src/tests/vm/run.sh" \
		--timeout $((rounds * 4 * (secs + 60) + 60)) -- "$src/bench/progress_ibverbs.sh" "$rounds" "$secs"
fi
ulimit -l unlimited 2>/dev/null
PS_VAN_PATH=${PS_VAN_PATH:-$PWD/plugins/van_ibverbs/.libs}
export PS_VAN_PATH
ip=$(ip -4 -o addr show 2>/dev/null | awk '$2 != "lo" {sub("/.*", "", $4); print $4; exit}')
out=$(mktemp "${TMPDIR:-/tmp}/progress-ibv.XXXXXX")
trap 'rm -f "$out"' EXIT
field() { echo "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"; }
echo "# $(nproc) vCPU, rxe0 at $ip, $secs s per run; keys, PS_CALLER_PROGRESS, p50 us, Gbps, requests"
r=0
while [ "$r" -lt "$rounds" ]; do
	for keys in 1 40; do
		for cp in 0 1; do
			line=$(PS_CALLER_PROGRESS=$cp NUM_KEY_PER_SERVER=$keys \
				timeout $((secs + 60)) tools/pslite-run -s 1 -w 1 --van ibverbs --host "$ip" \
				--timeout $((secs + 50)) -- tools/pslite-bench 4096 1 1 --seconds "$secs" --json 2>&1 |
				grep '"tool":"pslite-bench",')
			echo "$keys $cp $(field "$line" p50_us) $(field "$line" goodput_gbps) $(field "$line" requests)" |
				tee -a "$out"
		done
	done
	r=$((r + 1))
done
med() { # keys setting column
	awk -v k="$1" -v c="$2" -v f="$3" '$1 == k && $2 == c && $f != "" { print $f }' "$out" |
		sort -g | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : 0) }'
}
paired() { # keys column: median over rounds of on / off
	awk -v k="$1" -v f="$2" '$1 == k && $2 == 0 { o = $f } $1 == k && $2 == 1 && o > 0 && $f != "" { print $f / o; o = 0 }' "$out" |
		sort -g | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : 0) }'
}
echo "# keys | p50 off | p50 on | on/off | paired | Gbps off | Gbps on | on/off | paired | requests off | on"
for keys in 1 40; do
	awk -v k="$keys" -v p0="$(med "$keys" 0 3)" -v p1="$(med "$keys" 1 3)" -v pp="$(paired "$keys" 3)" \
		-v g0="$(med "$keys" 0 4)" -v g1="$(med "$keys" 1 4)" -v gp="$(paired "$keys" 4)" \
		-v q0="$(med "$keys" 0 5)" -v q1="$(med "$keys" 1 5)" 'BEGIN {
		printf "%s | %.1f | %.1f | %.2f | %.2f | %.4f | %.4f | %.2f | %.2f | %d | %d\n", k, p0, p1,
			p0 ? p1 / p0 : 0, pp, g0, g1, g0 ? g1 / g0 : 0, gp, q0, q1 }'
done
