#!/bin/sh
# The Python binding of the per-worker request deadline (issue 26):
# KVWorker(timeout_ms=300) against a server whose handler answers a pull
# after 1.5 s raises PsliteError ETIMEDOUT naming the deadline, well before
# the answer, and a WARN names the server that did not answer; the next pull gets its own answer;
# set_timeout(0) waits for the slow one (python/tests/timeout_job.py, 1+1
# job on zmq).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
s=${PSL_SRCDIR:?}
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "python_timeout.sh: SKIP: no python3"; exit 77; }
if grep -q 'fsanitize=address' "$b/Makefile" 2>/dev/null; then
	echo "python_timeout.sh: SKIP: sanitizer build (python3 cannot load an instrumented libpslite.so)"
	exit 77
fi
case ":$PS_VAN_PATH:" in *"/van_zmq/"*) ;; *) echo "python_timeout.sh: SKIP: van zmq not built"; exit 77 ;; esac
log=$(mktemp "${TMPDIR:-/tmp}/pslite-pyto.XXXXXX")
trap 'rm -f "$log"' EXIT
PSLITE_LIB=$b/.libs/libpslite.so PYTHONPATH=$s/python timeout -k 10 90 "$b/tools/pslite-run" \
	-s 1 -w 1 --van zmq --timeout 60 -- "$py" "$s/python/tests/timeout_job.py" >"$log" 2>&1
rc=$?
fail=0
[ $rc -eq 0 ] || { echo "python_timeout.sh: pslite-run exited $rc" >&2; fail=1; }
grep -q "python timeout worker: ETIMEDOUT after .*no answer within this worker's deadline (300 ms" "$log" ||
	{ echo "python_timeout.sh: the exception does not name the 300 ms deadline" >&2; fail=1; }
grep -q "worker.*WARN: request .* got no answer from server 0 .* within 300 ms" "$log" ||
	{ echo "python_timeout.sh: no WARN naming server 0 and 300 ms" >&2; fail=1; }
grep -q "python timeout worker: OK" "$log" || { echo "python_timeout.sh: the worker did not finish" >&2; fail=1; }
if [ $fail -ne 0 ]; then
	grep -v DEBUG "$log" | tail -n 30 >&2
	exit 1
fi
grep "python timeout worker" "$log"
exit 0
