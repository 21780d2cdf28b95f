#!/bin/sh
# A zero-copy push whose request fails (its deadline) while the van still
# sends its buffer to a frozen server: the request must complete only once
# the van let go of it, so that the worker may then overwrite and free it
# (issue 26, case 8). zfree.c says how; VAN (zmq by default) is what
# DMLC_ENABLE_RDMA gets.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=${1:-zmq}
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
case ":$PS_VAN_PATH:" in *"/van_$van/"*) ;; *) echo "zfree.sh: van $van not built, skipped"; exit 77 ;; esac
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-zfree.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
log=$dir/log
fail=0
bad() { echo "zfree.sh: $*" >&2; fail=1; }

# (pslite-run kills what is left after 60 s; timeout(1) everything)
ZFREE_DIR=$dir timeout -k 10 90 "$b/tools/pslite-run" -s 1 -w 1 --van "$van" --timeout 60 \
	--keep-going -- "$b/tests/integration/zfree" >"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "pslite-run exited $rc"
grep -q "zfree server: a push of 67108864 bytes: intact" "$log" ||
	bad "the server did not receive the push intact: the worker's request completed while the van still sent its buffer, which the worker then overwrote"
grep -q "zfree worker: the push completed after .*: .*" "$log" || bad "the worker's push did not complete"
grep -q "zfree worker: FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$log" &&
	bad "the worker or a sanitizer reported a failure"
if [ $fail -ne 0 ]; then
	grep -v DEBUG "$log" | tail -n 30 >&2
else
	grep "zfree " "$log"
fi
exit $fail
