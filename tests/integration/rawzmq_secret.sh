#!/bin/sh
# The job secret over zmq:
#  1. every node has PS_JOB_SECRET; a stranger beside the scheduler, who does
#     not know it, registers (anonymous, and with a made-up proof) and claims
#     ps8 and ps9 before the real nodes start (they start 1 s late). The
#     scheduler drops all of it, never sends the stranger the node list, and
#     the job ends well.
#  2. the worker has another secret: the scheduler never admits it, and the
#     job fails at PS_START_TIMEOUT with a line naming PS_JOB_SECRET.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-secret.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "rawzmq_secret.sh: $*" >&2; fail=1; }

log=$dir/stranger
PS_JOB_SECRET=open-sesame-4711 KVTEST_SCENARIO=data RAWZMQ_MODE=secret RAWZMQ_HOLD_S=8 \
timeout -k 10 150 "$b/tools/pslite-run" -s 1 -w 1 --van zmq --timeout 120 -- \
	sh -c 'if [ "$DMLC_ROLE" = scheduler ]; then "$1" & p=$!; "$2"; rc=$?; wait $p || rc=1; exit $rc; fi; sleep 1; exec "$2"' \
	sh "$b/tests/integration/rawzmq" "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "stranger: pslite-run exited $rc, expected 0"
for who in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest worker 0: OK" \
	"rawzmq secret: no node list came (OK)"; do
	grep -q "$who" "$log" || bad "stranger: no '$who'"
done
n=$(grep "\[scheduler\]" "$log" | grep -c "identity proves no PS_JOB_SECRET")
[ "$n" -ge 4 ] || bad "stranger: the scheduler dropped $n of the stranger's 4 messages"
grep -q "open-sesame-4711" "$log" && bad "the secret appears in the log"
[ $fail -eq 0 ] || { echo "----- stranger -----" >&2; tail -n 60 "$log" >&2; }

f0=$fail
log=$dir/wrong
# (the scheduler gives up first, so that its line is written before
# pslite-run ends the job)
PS_JOB_SECRET=open-sesame-4711 PS_START_TIMEOUT=5 KVTEST_SCENARIO=data \
timeout -k 10 150 "$b/tools/pslite-run" -s 1 -w 1 --van zmq --timeout 120 -- \
	sh -c 'if [ "$DMLC_ROLE" = worker ]; then export PS_JOB_SECRET=another-secret-1; fi
		[ "$DMLC_ROLE" = scheduler ] || export PS_START_TIMEOUT=30; exec "$1"' \
	sh "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
[ $rc -ne 0 ] || bad "wrong secret: pslite-run exited 0"
grep "\[scheduler\]" "$log" | grep -q "0 of 1 workers.*the same PS_JOB_SECRET" ||
	bad "wrong secret: the scheduler did not name PS_JOB_SECRET when the worker was missing"
[ $fail -eq $f0 ] || { echo "----- wrong secret -----" >&2; tail -n 60 "$log" >&2; }
echo "rawzmq_secret.sh: stranger and wrong secret checked"
exit $fail
