#!/bin/sh
# Nodes that are alive, but silent or slow, are not declared lost by the
# default heartbeats. Worker 1 is rawzmq in its quiet mode (it registers and
# behaves as a C++ ps-lite worker without PS_HEARTBEAT_INTERVAL: no pslite
# body in its registration, no heartbeats) and stays silent for 12 s, beside
# a kvtest scheduler, server and worker 0; server 0's handler sleeps 8 s once
# on its receive thread (the scheduler's heartbeat answers wait behind it).
# With PS_HEARTBEAT_TIMEOUT=5 (and no PS_HEARTBEAT_INTERVAL, so only nodes
# that promised heartbeats are judged), the pslite nodes heartbeat every
# second, nobody declares anyone lost, and every node ends well. Van zmq.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
log=$(mktemp "${TMPDIR:-/tmp}/pslite-hbalive.XXXXXX")
trap 'rm -f "$log"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "hb_alive.sh: $*" >&2; fail=1; }

unset PS_HEARTBEAT_INTERVAL
KVTEST_SCENARIO=soak KVTEST_ROUNDS=50 KVTEST_SLOW_S=8 RAWZMQ_MODE=quiet RAWZMQ_QUIET_S=12 \
PS_HEARTBEAT_TIMEOUT=5 PS_VERBOSE=1 \
timeout -k 10 120 "$b/tools/pslite-run" -s 1 -w 2 --van zmq --timeout 100 -- \
	sh -c 'if [ "$DMLC_ROLE" = worker ] && [ "$DMLC_RANK" = 1 ]; then exec "$1"; else exec "$2"; fi' \
	sh "$b/tests/integration/rawzmq" "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?

[ $rc -eq 0 ] || bad "pslite-run exited $rc, expected 0 (every node must exit 0)"
for who in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest worker 0: OK" \
	"rawzmq quiet: silent for 12 s" "rawzmq worker 1: OK" \
	"kvtest server 0: my handler sleeps 8 s"; do
	grep -q "$who" "$log" || bad "no '$who'"
done
grep "lost worker 1" "$log" && bad "a node declared the silent worker 1 lost"
grep "lost the scheduler" "$log" && bad "a node declared the scheduler lost"
grep "ERROR: lost" "$log" | grep -v "lost worker 1" && bad "a node declared another lost"
grep -q "^\[scheduler\].*heartbeats: a pslite node that sends them silent for 5 s is declared lost" "$log" ||
	bad "the scheduler did not say it judges the pslite nodes' heartbeats"
grep -q "^\[worker 0\].*heartbeats: every 1 s" "$log" ||
	bad "worker 0 did not say it sends heartbeats every second"
if [ $fail -ne 0 ]; then
	echo "----- output of the job -----" >&2
	grep -v "goodput" "$log" | tail -n 80 >&2
fi
exit $fail
