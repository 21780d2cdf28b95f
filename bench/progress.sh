#!/bin/sh
# bench/progress.sh [ROUNDS] [SECONDS]: pslite-bench push-pull of 4 KiB keys
# over van ucx (shared memory, then tcp), 1 and 40 keys in flight, with
# PS_CALLER_PROGRESS=0 and =1 alternately (1 scheduler, 1 server, 1 worker on
# loopback). Prints each run, then per case the median p50 (us) and goodput
# (Gbps) of each setting and their ratio (on / off). Run from the build
# directory.
rounds=${1:-3}
secs=${2:-5}
[ -x tools/pslite-bench ] || { echo "$0: run it from the build directory" >&2; exit 2; }
PS_VAN_PATH=${PS_VAN_PATH:-$PWD/plugins/van_ucx/.libs}
export PS_VAN_PATH
out=$(mktemp "${TMPDIR:-/tmp}/progress-bench.XXXXXX")
trap 'rm -f "$out"' EXIT
for tls in posix,sysv,cma,self tcp; do
	for keys in 1 40; do
		r=0
		while [ "$r" -lt "$rounds" ]; do
			for cp in 0 1; do
				line=$(UCX_TLS=$tls PS_CALLER_PROGRESS=$cp NUM_KEY_PER_SERVER=$keys \
					timeout $((secs + 60)) tools/pslite-run -s 1 -w 1 --van ucx -- \
					tools/pslite-bench 4096 1 1 --seconds "$secs" --json 2>&1 |
					grep '"tool":"pslite-bench",')
				p50=$(echo "$line" | sed -n 's/.*"p50_us":\([0-9.]*\).*/\1/p')
				gb=$(echo "$line" | sed -n 's/.*"goodput_gbps":\([0-9.]*\).*/\1/p')
				echo "$tls $keys $cp ${p50:-fail} ${gb:-fail}" | tee -a "$out"
			done
			r=$((r + 1))
		done
	done
done
echo "# UCX_TLS keys | p50 off | p50 on | on/off | Gbps off | Gbps on | on/off"
awk '
function med(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$4 != "fail" { k = $1 " " $2; n[k, $3]++; p[k, $3, n[k, $3]] = $4; g[k, $3, n[k, $3]] = $5; keys[k] = 1 }
END {
	for (k in keys) {
		for (c = 0; c <= 1; c++) {
			delete a; delete b
			for (i = 1; i <= n[k, c]; i++) { a[i] = p[k, c, i]; b[i] = g[k, c, i] }
			mp[c] = med(a, n[k, c]); mg[c] = med(b, n[k, c])
		}
		printf "%s | %.1f | %.1f | %.2f | %.3f | %.3f | %.2f\n", k, mp[0], mp[1], mp[1] / mp[0], mg[0], mg[1], mg[1] / mg[0]
	}
}' "$out" | sort
