#!/bin/sh
# Malformed frames from a raw ZeroMQ socket: rawzmq (an "evil worker" that
# speaks the wire protocol by hand) runs as worker 1 beside a real kvtest
# worker 0 (soak scenario: its pulled data is checked), with 1 scheduler and
# 2 servers. Every node must end well, and for each message a node had to
# drop, that node must have logged a line naming the sender and the reason.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
log=$(mktemp "${TMPDIR:-/tmp}/pslite-rawzmq.XXXXXX")
trap 'rm -f "$log"' EXIT
ulimit -c 0 2>/dev/null

KVTEST_SCENARIO=soak KVTEST_ROUNDS=${KVTEST_ROUNDS:-150} KVTEST_READY_BARRIER=1 \
timeout -k 10 200 "$b/tools/pslite-run" -s 2 -w 2 --van zmq --timeout 180 -- \
	sh -c 'if [ "$DMLC_ROLE" = worker ] && [ "$DMLC_RANK" = 1 ]; then exec "$1"; else exec "$2"; fi' \
	sh "$b/tests/integration/rawzmq" "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?

fail=0
bad() { echo "rawzmq.sh: $*" >&2; fail=1; }
[ $rc -eq 0 ] || bad "pslite-run exited $rc, expected 0 (every node must exit 0)"
for who in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest server 1: OK" \
	"kvtest worker 0: OK" "rawzmq worker 1: OK"; do
	grep -q "$who" "$log" || bad "no '$who'"
done
# malformed input is a warning, never an error of the node that got it
if grep "ERROR" "$log"; then
	bad "a node logged an ERROR"
fi
if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:|Aborted|Segmentation|FAILED' "$log"; then
	bad "a node crashed, failed or reported a sanitizer error"
fi

n=0
sed -n 's/^\[[^]]*\] rawzmq: EXPECT //p' "$log" >"$log.expect"
while IFS='|' read -r node a c; do
	n=$((n + 1))
	if ! grep -F "[$node] " "$log" | grep -F -- "$a" | grep -qF -- "$c"; then
		bad "$node did not log a line with '$a' and '$c'"
	fi
done <"$log.expect"
rm -f "$log.expect"
[ $n -ge 40 ] || bad "only $n messages to check: the evil worker did not get through its list"
echo "rawzmq.sh: $n dropped messages checked in the nodes' logs"

if [ $fail -ne 0 ]; then
	echo "----- output of the job -----" >&2
	tail -n 300 "$log" >&2
fi
exit $fail
