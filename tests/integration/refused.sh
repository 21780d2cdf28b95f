#!/bin/sh
# A registration the scheduler ignores is reported to the node that sent it
# (without a secret, a stranger that registers first takes a node's place):
# two workers register for a job of 1 server and 1 worker, over every built
# van (zmq; ucx and fabric restricted to TCP). One is admitted and the job
# ends well; the other must fail at once with a line naming the reason and
# PS_JOB_SECRET, not wait for PS_START_TIMEOUT (100 s, past this test's
# limit).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-refused.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0 ran=0
bad() { echo "refused.sh $van: $*" >&2; fail=1; }

for van in zmq ucx fabric; do
	case ":$PS_VAN_PATH:" in *"/van_$van/"*) ;; *) echo "refused.sh: van $van not built, skipped"; continue ;; esac
	ran=$((ran + 1))
	log=$dir/$van
	f0=$fail
	UCX_TLS=tcp FI_PROVIDER=tcp PS_START_TIMEOUT=100 KVTEST_SCENARIO=data \
	timeout -k 10 100 "$b/tools/pslite-run" -s 1 -w 2 --van "$van" --timeout 90 --keep-going -- \
		sh -c 'export DMLC_NUM_WORKER=1; unset DMLC_RANK; exec "$1"' sh "$b/tests/integration/kvtest" >"$log" 2>&1
	rc=$?
	[ $rc -ne 124 ] || bad "the job hung"
	for who in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest worker 0: OK"; do
		grep -q "$who" "$log" || bad "no '$who' (the admitted nodes did not end well)"
	done
	n=$(grep -c "ERROR: the scheduler at .* refused this node's registration: .*PS_JOB_SECRET" "$log")
	[ "$n" -eq 1 ] || bad "$n workers said the scheduler refused them, expected 1"
	[ $fail -eq $f0 ] || { echo "----- $van -----" >&2; grep -v DEBUG "$log" | tail -n 30 >&2; }
done
[ $ran -gt 0 ] || { echo "refused.sh: no van built"; exit 77; }
[ $fail -eq 0 ] && echo "refused.sh: the refused worker was told, over $ran vans"
exit $fail
