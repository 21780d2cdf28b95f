# bench/goal_lib.sh: what bench/goals.sh and bench/server_poll.sh share,
# sourced by them (not run). Before sourcing: B (the build), SECS, BASE
# (the first port), ME (the script's name for its messages).
#   goal_need          the tools the jobs run, and ucx_perftest, or exit 2
#   vanpath BUILDDIR   PS_VAN_PATH of that build's plugins
#   goal_work PREFIX   a work folder ($work), the results file ($res), and
#                      a clean-up at exit that kills $pids and removes it
#   port               the next port from BASE
#   field JSON NAME    a number from a tool's --json line, "-" if none
#   put KEY VALUE      one round's value ($r) into $res, and on stderr
#   median KEY [COL]   the median over the rounds, "-" when none
#   pratio A B [COL]   the median over the rounds of A / B, as %.2f
#   amlat TLS          ucx_perftest's AM round trip p50 (us)

goal_need() {
	for f in tools/pslite-run tools/pslite-bench tools/pslite-afbench bench/tcp_ref; do
		[ -x "$B/$f" ] || { echo "$ME: $B/$f is missing: build first (make), or set PSL_BUILDDIR" >&2; exit 2; }
	done
	command -v ucx_perftest >/dev/null || { echo "$ME: ucx_perftest is missing (ucx-utils)" >&2; exit 2; }
}

vanpath() {
	p=
	for d in "$1"/plugins/*/.libs; do [ -d "$d" ] && p=${p:+$p:}$d; done
	echo "$p"
}

goal_work() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	pids=
	res=$work/res
	: >"$res"
	n=0
	trap goal_cleanup EXIT
	trap 'exit 130' INT TERM
}
goal_cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}

port() { n=$((n + 1)); echo $((BASE + n % 400)); }
field() { v=$(echo "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"); echo "${v:--}"; }
put() { echo "$1 $r $2" >>"$res"; echo "  round $r $1: $2" >&2; }

# numbers on stdin -> their median, "-" when none
goal_med() {
	sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
median() { awk -v k="$1" -v c="${2:-3}" '$1 == k && $c != "-" && $c != "" {print $c}' "$res" | goal_med; }
pratio() {
	awk -v a="$1" -v b="$2" -v c="${3:-3}" '($1 == a || $1 == b) && $c != "-" && $c != "" {v[$1, $2] = $c; r[$2] = 1}
		END {for (i in r) if ((a, i) in v && (b, i) in v && v[b, i] + 0 > 0) print v[a, i] / v[b, i]}' "$res" |
		goal_med | awk '{if ($1 == "-") printf "-"; else printf "%.2f", $1}'
}

# (twice ucx_perftest's p50, which is half a round trip; T: the time limit)
amlat() {
	p=$(port)
	UCX_TLS=$1 timeout -k 5 "$T" ucx_perftest -t ucp_am_lat -s 4096 -n $((SECS * 40000)) -p "$p" >"$work/pt.srv" 2>&1 &
	spid=$!
	pids="$pids $spid"
	sleep 0.5
	UCX_TLS=$1 timeout -k 5 "$T" ucx_perftest 127.0.0.1 -t ucp_am_lat -s 4096 -n $((SECS * 40000)) -p "$p" \
		>"$work/pt.cli" 2>&1 || true
	wait "$spid" 2>/dev/null || true
	# "Final: iters p50 average overall ..." (us, one way)
	v=$(awk '/^Final:/ {printf "%.3f\n", $3 * 2}' "$work/pt.cli")
	echo "${v:--}"
}
