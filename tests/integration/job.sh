#!/bin/sh
# Runs one kvtest job on loopback and checks that every node says OK.
#   job.sh VAN SCENARIO SERVERS WORKERS [TIMEOUT]
# VAN is what DMLC_ENABLE_RDMA gets (zmq, ucx, fabric, ...); SCENARIO is
# kvtest's (data, kill, soak). Needs PSL_BUILDDIR (set by make check).
set -u
van=$1 scenario=$2 S=$3 W=$4 limit=${5:-240}
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
log=$(mktemp "${TMPDIR:-/tmp}/pslite-job.XXXXXX")
trap 'rm -f "$log"' EXIT

keep=
[ "$scenario" = kill ] && keep=--keep-going
KVTEST_SCENARIO=$scenario "$b/tools/pslite-run" -s "$S" -w "$W" --van "$van" \
	--timeout "$limit" $keep -- "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?

fail=0
expect() { # expect LABEL: that node printed "kvtest LABEL: OK"
	if ! grep -q "kvtest $1: OK" "$log"; then
		echo "job.sh: $van/$scenario: no 'kvtest $1: OK'" >&2
		fail=1
	fi
}
expect "scheduler 0"
i=0; while [ $i -lt "$W" ]; do expect "worker $i"; i=$((i + 1)); done
i=0; while [ $i -lt "$S" ]; do
	[ "$scenario" = kill ] && [ $i -eq 1 ] || expect "server $i"
	i=$((i + 1))
done
if [ "$scenario" = kill ]; then
	# the killed server ends with SIGKILL (137); nothing else may fail
	[ $rc -eq 137 ] || { echo "job.sh: pslite-run exited $rc, expected 137 (server 1 killed)" >&2; fail=1; }
	grep -q "lost server 1" "$log" || { echo "job.sh: nobody reported server 1 lost" >&2; fail=1; }
else
	[ $rc -eq 0 ] || { echo "job.sh: pslite-run exited $rc" >&2; fail=1; }
	# a job that ends well has nothing to report as an error, shutdown included
	if grep -q "ERROR" "$log"; then
		echo "job.sh: $van/$scenario: a node logged an ERROR in a job that ended well:" >&2
		grep "ERROR" "$log" >&2
		fail=1
	fi
fi
if grep -q "FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$log"; then
	echo "job.sh: a node reported a failure or a sanitizer error" >&2
	fail=1
fi
if [ $fail -ne 0 ]; then
	echo "----- output of the job ($van/$scenario) -----" >&2
	tail -n 200 "$log" >&2
fi
exit $fail
