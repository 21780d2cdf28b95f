#!/bin/sh
# A node list the scheduler cannot send fails the whole job at once, with the
# reason in every log (issue 31, item 2). The scheduler alone gets
# PS_ZMQ_MAX_MSG_MB=0.002 (2097 bytes): registrations (664 bytes) reach it,
# but the node list of a job of 2 servers and 2 workers (2872 bytes) cannot
# leave it. PS_START_TIMEOUT is 120 s: every process must exit non-zero well
# before (within LIMIT seconds), the scheduler's log must say which message
# could not go to whom and why (naming the setting), and each server and
# worker must fail its start with one line naming that cause.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
case ":$PS_VAN_PATH:" in *"/van_zmq/"*) ;; *) echo "undelivered.sh: van zmq not built, skipped"; exit 77 ;; esac
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-undelivered.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
LIMIT=20
fail=0
bad() { echo "undelivered.sh: $*" >&2; fail=1; }
log=$dir/log

t0=$(date +%s)
# pslite-run picks a free scheduler port itself; each process is killed by
# pslite-run's --timeout, and everything by timeout(1)
PS_START_TIMEOUT=120 KVTEST_SCENARIO=data \
timeout -k 10 100 "$b/tools/pslite-run" -s 2 -w 2 --timeout 90 --keep-going -- \
	sh -c '[ "$DMLC_ROLE" = scheduler ] && export PS_ZMQ_MAX_MSG_MB=0.002; exec "$1"' \
	sh "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
took=$(( $(date +%s) - t0 ))
[ $rc -ne 124 ] && [ $rc -ne 137 ] || bad "the job hung (killed after 100 s)"
[ $rc -ne 0 ] || bad "pslite-run exited 0: the job should have failed"
[ $took -le $LIMIT ] || bad "the job took $took s to fail, expected at most $LIMIT s (PS_START_TIMEOUT=120)"

grep -q "\[scheduler\] .*ERROR: cannot send the node list (5 nodes, 2872 bytes) to .*(id [0-9]*, .*PS_ZMQ_MAX_MSG_MB" "$log" ||
	bad "the scheduler's log does not name the node list, its receiver and PS_ZMQ_MAX_MSG_MB"
for who in "server 0" "server 1" "worker 0" "worker 1"; do
	grep -q "\[$who\] .*ERROR: the scheduler at .* stopped the job's start: cannot send the node list .*PS_ZMQ_MAX_MSG_MB" "$log" ||
		bad "$who did not fail its start with a line naming the cause"
done
n=$(grep -c "kvtest: psl_start: the job stopped: a control message could not be delivered" "$log")
[ "$n" -eq 5 ] || bad "$n processes said psl_start failed with the undelivered message, expected 5"
grep -q "OK$" "$log" && bad "a process reported OK"
grep -q "PS_START_TIMEOUT" "$log" && bad "a node waited for PS_START_TIMEOUT"

if [ $fail -ne 0 ]; then
	grep -v DEBUG "$log" | tail -n 40 >&2
else
	echo "undelivered.sh: the job failed in $took s, every node naming the undelivered node list"
fi
exit $fail
