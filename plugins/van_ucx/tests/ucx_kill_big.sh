#!/bin/bash
# The server is killed (SIGKILL) while 8 MiB pull answers are on their way
# into the worker's own buffers (PS_UCX_PULL_IN_PLACE, the default): the
# worker's requests must fail with an error within seconds, not wait for
# data that never comes. Over UCX_TLS=tcp and shared memory without
# cross-memory attach: with cma, UCX 1.13 aborts a process whose peer dies
# in the middle of a transfer (docs/van-ucx.md, "Known problems").
#   ucx_kill_big.sh [UCX_TLS...]
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pslite-killbig.XXXXXX")
pids=
cleanup() {
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
vp=
for d in "$b"/plugins/*/.libs; do [ -d "$d" ] && vp=${vp:+$vp:}$d; done
export PS_VAN_PATH=${PS_VAN_PATH:-$vp}
bench=$b/tools/pslite-bench
fail=0
for tls in ${*:-tcp posix,sysv,self}; do
	port=$("$b/tests/integration/startnode" --free-port) || { echo "no free port" >&2; exit 1; }
	export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1 \
		DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_ENABLE_RDMA=ucx UCX_TLS=$tls \
		NUM_KEY_PER_SERVER=16
	unset DMLC_PORT DMLC_RANK
	# (the last round's logs must go first: a "goodput" line left in w.log
	# had this round kill its server before it even registered)
	rm -f "$tmp"/*.log
	DMLC_ROLE=scheduler timeout -k 5 90 "$bench" 8388608 1 1 >"$tmp/s.log" 2>&1 &
	sp=$!
	# (no timeout wrapper: the kill must reach the server itself; the
	# trap ends it if the test fails first)
	DMLC_ROLE=server "$bench" 8388608 1 1 >"$tmp/srv.log" 2>&1 &
	srv=$!
	DMLC_ROLE=worker timeout -k 5 90 "$bench" 8388608 1 1 --seconds 60 >"$tmp/w.log" 2>&1 &
	w=$!
	pids="$sp $srv $w"
	t=0
	until grep -q "goodput" "$tmp/w.log" 2>/dev/null; do
		sleep 0.2
		t=$((t + 1))
		[ $t -lt 200 ] || { echo "ucx_kill_big.sh: $tls: the job did not start" >&2; tail "$tmp"/*.log >&2; exit 1; }
	done
	kill -KILL "$srv"
	wait "$srv" 2>/dev/null
	t0=$(date +%s)
	wait "$w"
	rc=$?
	t1=$(date +%s)
	wait "$sp"
	echo "ucx_kill_big.sh: $tls: the worker ended $((t1 - t0)) s after the kill, exit $rc"
	[ "$rc" -ne 0 ] || { echo "ucx_kill_big.sh: $tls: worker exited 0 after losing its server" >&2; fail=1; }
	[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "ucx_kill_big.sh: $tls: the worker hung" >&2; fail=1; }
	[ $((t1 - t0)) -le 20 ] || { echo "ucx_kill_big.sh: $tls: the worker took $((t1 - t0)) s" >&2; fail=1; }
	grep -q "a node of the job is lost: stopping" "$tmp/w.log" ||
		{ echo "ucx_kill_big.sh: $tls: the worker did not stop on the lost server" >&2; fail=1; }
	if grep -q "ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer" "$tmp"/*.log; then
		echo "ucx_kill_big.sh: $tls: a sanitizer report" >&2
		grep -m 1 -A 40 "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" "$tmp"/*.log >&2
		fail=1
	fi
	[ $fail -eq 0 ] || { tail -n 15 "$tmp"/*.log >&2; exit 1; }
	pids=
done
exit $fail
