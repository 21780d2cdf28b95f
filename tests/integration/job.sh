#!/bin/sh
# Runs one kvtest job on loopback and checks that every node says OK.
#   job.sh VAN SCENARIO SERVERS WORKERS [TIMEOUT]
# VAN is what DMLC_ENABLE_RDMA gets (zmq, ucx, fabric, ...); SCENARIO is
# kvtest's (data, kill, soak). Needs PSL_BUILDDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1 scenario=$2 S=$3 W=$4 limit=${5:-240}
what=$scenario
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-job.XXXXXX")
log=$dir/log
trap 'rm -rf "$dir"' EXIT

keep=
case $scenario in
kill) keep=--keep-going ;;
hang) # server 1 stops answering; heartbeats find it
	keep=--keep-going
	# (generous: a live node on a loaded machine must not miss 10 heartbeats)
	export PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=10 ;;
resend) # 3% of received messages are lost on purpose: the resender must
	# bring every one back, and duplicates must not be processed twice
	scenario=data
	# (the timeout must cover sending the largest message, 16 MiB, on a
	# loaded machine under the sanitizers)
	export PS_RESEND=1 PS_RESEND_TIMEOUT=1000 PS_DROP_MSG=3 ;;
esac
KVTEST_DIR=$dir KVTEST_SCENARIO=$scenario "$b/tools/pslite-run" -s "$S" -w "$W" --van "$van" \
	--timeout "$limit" $keep -- "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?

fail=0
expect() { # expect LABEL: that node printed "kvtest LABEL: OK"
	if ! grep -q "kvtest $1: OK" "$log"; then
		echo "job.sh: $van/$what: no 'kvtest $1: OK'" >&2
		fail=1
	fi
}
expect "scheduler 0"
i=0; while [ $i -lt "$W" ]; do expect "worker $i"; i=$((i + 1)); done
i=0; while [ $i -lt "$S" ]; do
	case $scenario in kill | hang) [ $i -eq 1 ] || expect "server $i" ;; *) expect "server $i" ;; esac
	i=$((i + 1))
done
if [ "$scenario" = kill ] || [ "$scenario" = hang ]; then
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
	echo "job.sh: a node reported a failure or a sanitizer error:" >&2
	# first, so that a report cut short still shows them
	grep -m 20 "FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer\|SUMMARY:\|#[0-9]* 0x" "$log" >&2
	fail=1
fi
# PSL_JOB_LOG: where to keep the job's output (for callers' own checks)
[ -n "${PSL_JOB_LOG:-}" ] && cp "$log" "$PSL_JOB_LOG"
if [ $fail -ne 0 ]; then
	echo "----- output of the job ($van/$what) -----" >&2
	tail -n 200 "$log" >&2
fi
exit $fail
