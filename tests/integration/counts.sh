#!/bin/sh
# Count mismatches name the misconfigured node at once (issue 26, case 5),
# not after PS_START_TIMEOUT (100 s here, past this test's limits): a job of
# 1 server and 1 worker on zmq where (a) the worker has DMLC_NUM_SERVER=2:
# the scheduler refuses its registration with a line naming the worker, the
# variable and both values, and the worker fails its start with that
# reason; (b) the scheduler has DMLC_NUM_SERVER=2 while both nodes agree on
# 1: the scheduler says that its own counts are the odd ones. In each,
# pslite-run's last line names the node with another value than the one it
# set, not the first node to exit (in (b) without --keep-going that is the
# worker the scheduler refused).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-counts.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "counts.sh: $*" >&2; fail=1; }
case ":$PS_VAN_PATH:" in *"/van_zmq/"*) ;; *) echo "counts.sh: SKIP: van zmq not built"; exit 77 ;; esac

# run ROLE [--keep-going] [LOG]: a 1+1 job in which ROLE has
# DMLC_NUM_SERVER=2 (with --keep-going, pslite-run waits for every node to
# end); its output in $dir/LOG (default ROLE)
run() {
	t0=$(date +%s)
	PS_START_TIMEOUT=100 KVTEST_SCENARIO=data ODD=$1 \
	timeout -k 5 60 "$b/tools/pslite-run" -s 1 -w 1 --van zmq --timeout 50 ${2:-} -- \
		sh -c '[ "$DMLC_ROLE" != "$ODD" ] || export DMLC_NUM_SERVER=2; exec "$1"' sh \
		"$b/tests/integration/kvtest" >"$dir/${3:-$1}" 2>&1
	rc=$?
	secs=$(($(date +%s) - t0))
	[ $rc -ne 0 ] || bad "$1 with DMLC_NUM_SERVER=2: pslite-run exited 0"
	[ $rc -ne 124 ] || bad "$1 with DMLC_NUM_SERVER=2: the job hung"
	[ $secs -le 30 ] || bad "$1 with DMLC_NUM_SERVER=2: took $secs s, expected a few"
}

# blamed LOG WHO: pslite-run's last line names WHO with DMLC_NUM_SERVER=2
blamed() {
	last=$(grep '^pslite-run: ' "$dir/$1" | tail -n 1)
	printf '%s\n' "$last" | grep -q "^pslite-run: $2 is misconfigured: it has DMLC_NUM_SERVER=2, but pslite-run set DMLC_NUM_SERVER=1 for every node" ||
		bad "$1: pslite-run's last line does not blame $2 for DMLC_NUM_SERVER=2: $last"
}

run worker
l=$dir/worker
grep -q "scheduler.*ERROR: refused the registration of the worker at .*: DMLC_NUM_SERVER=2 at the worker at .*, but DMLC_NUM_SERVER=1 at the scheduler" "$l" ||
	bad "the scheduler did not name the worker, DMLC_NUM_SERVER and both values"
grep -q "worker.*ERROR: the scheduler at .* refused this node's registration: DMLC_NUM_SERVER=2 at the worker" "$l" ||
	bad "the worker did not fail with the scheduler's reason"
blamed worker "worker 0 (the worker at [^ ]*)"
[ $fail -eq 0 ] || { echo "----- worker -----" >&2; grep -v DEBUG "$l" | tail -n 20 >&2; }
f0=$fail

run scheduler --keep-going
l=$dir/scheduler
grep -q "scheduler.*ERROR: the scheduler's counts are the odd ones: all 2 nodes that registered have DMLC_NUM_SERVER=1 .* but here DMLC_NUM_SERVER=2" "$l" ||
	bad "the scheduler did not say that its own DMLC_NUM_SERVER is the odd one"
blamed scheduler "the scheduler"
run scheduler "" scheduler-first
blamed scheduler-first "the scheduler"
[ $fail -eq $f0 ] || { echo "----- scheduler -----" >&2; grep -v DEBUG "$l" | tail -n 20 >&2; }
[ $fail -eq 0 ] && echo "counts.sh: the misconfigured node was named within seconds"
exit $fail
