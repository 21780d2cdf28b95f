#!/bin/bash
# A worker that loses the scheduler (here: the scheduler is frozen for 5 s
# and the worker's PS_HEARTBEAT_TIMEOUT is 2 s) cannot go on: every request
# it has or makes fails at once with an error, and it ends; nothing waits
# for answers that may never come. The scheduler, server and the other
# worker (with a long timeout) must not hang either. Van zmq.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pslite-schedlost.XXXXXX")
pids=
cleanup() {
	for p in $pids; do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
port=$("$b/tests/integration/startnode" --free-port) || { echo "no free port" >&2; exit 1; }
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1 \
	DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2 PS_HEARTBEAT_INTERVAL=1 NUM_KEY_PER_SERVER=4
unset DMLC_ENABLE_RDMA DMLC_PORT DMLC_RANK
bench=$b/tools/pslite-bench
PS_HEARTBEAT_TIMEOUT=60 DMLC_ROLE=scheduler "$bench" 4096 1 1 >"$tmp/s.log" 2>&1 &
sp=$!
pids="$sp"
PS_HEARTBEAT_TIMEOUT=60 DMLC_ROLE=server DMLC_RANK=0 timeout -k 5 60 "$bench" 4096 1 1 >"$tmp/srv.log" 2>&1 &
pids="$pids $!"
PS_HEARTBEAT_TIMEOUT=60 DMLC_ROLE=worker DMLC_RANK=0 timeout -k 5 60 "$bench" 4096 1 1 --seconds 12 >"$tmp/w0.log" 2>&1 &
w0=$!
pids="$pids $w0"
PS_HEARTBEAT_TIMEOUT=2 DMLC_ROLE=worker DMLC_RANK=1 timeout -k 5 60 "$bench" 4096 1 1 --seconds 30 >"$tmp/w1.log" 2>&1 &
w1=$!
pids="$pids $w1"
fail=0
# wait until both workers run, then freeze the scheduler
t=0
until grep -q "goodput" "$tmp/w1.log" 2>/dev/null && grep -q "goodput" "$tmp/w0.log" 2>/dev/null; do
	sleep 0.2
	t=$((t + 1))
	[ $t -lt 150 ] || { echo "sched_lost.sh: the job did not start" >&2; tail "$tmp"/*.log >&2; exit 1; }
done
kill -STOP "$sp"
sleep 5
kill -CONT "$sp"
t0=$(date +%s)
wait "$w1"
rc1=$?
t1=$(date +%s)
# worker 1 was to run 30 s: it must end long before, with an error
[ "$rc1" -ne 0 ] || { echo "sched_lost.sh: worker 1 exited 0 after losing the scheduler" >&2; fail=1; }
[ "$rc1" -ne 124 ] && [ "$rc1" -ne 137 ] || { echo "sched_lost.sh: worker 1 hung" >&2; fail=1; }
[ $((t1 - t0)) -le 15 ] || { echo "sched_lost.sh: worker 1 took $((t1 - t0)) s to end after the scheduler came back" >&2; fail=1; }
grep -q "lost the scheduler" "$tmp/w1.log" || { echo "sched_lost.sh: worker 1 did not report the scheduler lost" >&2; fail=1; }
grep -q "every request fails now" "$tmp/w1.log" || { echo "sched_lost.sh: worker 1 did not say its requests fail" >&2; fail=1; }
# the others end too (worker 0 after its 12 s; then the server and scheduler)
wait "$w0"
rc0=$?
[ "$rc0" -ne 124 ] && [ "$rc0" -ne 137 ] || { echo "sched_lost.sh: worker 0 hung" >&2; fail=1; }
for p in $pids; do
	wait "$p" 2>/dev/null
	r=$?
	[ $r -ne 124 ] && [ $r -ne 137 ] || { echo "sched_lost.sh: a node hung (pid $p)" >&2; fail=1; }
done
if cat "$tmp"/*.log | grep -qE "AddressSanitizer|runtime error:|LeakSanitizer|Segmentation|Aborted"; then
	echo "sched_lost.sh: a crash or sanitizer report" >&2
	fail=1
fi
if [ $fail -ne 0 ]; then
	for f in s srv w0 w1; do
		echo "----- $f -----" >&2
		grep -v "Application goodput" "$tmp/$f.log" | tail -n 15 >&2
		# a sanitizer's report from its start (the tail is its legend)
		grep -m 1 -A 40 "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" "$tmp/$f.log" >&2
	done
fi
exit $fail
