#!/bin/sh
# The job secret (PS_JOB_SECRET) over one van:
#   secret_job.sh VAN
#  1. every node has the same secret: kvtest's data checks pass;
#  2. the server has another secret: the scheduler's van refuses its
#     connection, and the server fails at once with a line that names
#     PS_JOB_SECRET (not at PS_START_TIMEOUT, not silently), the job fails.
# (pslite-vantest's case "secret" checks the van alone: a connection that
# proves another secret or none delivers nothing.)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-secretjob.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "secret_job.sh $van: $*" >&2; fail=1; }

log=$dir/same
PS_JOB_SECRET=correct-horse-17 KVTEST_SCENARIO=data \
timeout -k 10 150 "$b/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout 120 -- \
	"$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "same secret: pslite-run exited $rc, expected 0"
for who in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest worker 0: OK"; do
	grep -q "$who" "$log" || bad "same secret: no '$who'"
done
grep -q "correct-horse-17" "$log" && bad "same secret: the secret appears in the log"
[ $fail -eq 0 ] || { echo "----- same secret -----" >&2; tail -n 40 "$log" >&2; }

f0=$fail
log=$dir/other
# the others wait up to 60 s for the server; the server must give up first,
# naming the secret, because the scheduler's van refused it
PS_JOB_SECRET=correct-horse-17 PS_START_TIMEOUT=60 KVTEST_SCENARIO=data \
timeout -k 10 150 "$b/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout 120 -- \
	sh -c 'if [ "$DMLC_ROLE" = server ]; then export PS_JOB_SECRET=battery-staple-2; fi
		exec "$1"' sh "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
[ $rc -ne 0 ] || bad "other secret: pslite-run exited 0"
[ $rc -ne 124 ] || bad "other secret: the job hung"
grep "^\[server 0\]" "$log" | grep -q "cannot register with the scheduler.*refused.*PS_JOB_SECRET" ||
	bad "other secret: the server did not say that the scheduler refused it for PS_JOB_SECRET"
grep "^\[scheduler\]" "$log" | grep -q "refused a connection.*PS_JOB_SECRET" ||
	bad "other secret: the scheduler did not warn about the refused connection"
[ $fail -eq $f0 ] || { echo "----- other secret -----" >&2; tail -n 40 "$log" >&2; }
[ $fail -eq 0 ] && echo "secret_job.sh $van: same secret and another secret checked"
exit $fail
