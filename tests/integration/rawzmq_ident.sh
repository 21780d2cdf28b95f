#!/bin/sh
# Identities over zmq, from a stranger that picks its own (rawzmq modes):
#  1. preclaim: beside the scheduler, a stranger claims ps8 and ps9 at the
#     scheduler before any node has an id, sends a barrier as each and holds
#     the connections. The scheduler drops them (ids it has not assigned), the
#     real server and worker take their identities over (the stranger's
#     connections are left unused), and the job ends well. (The real nodes
#     start 1 s late, so that the stranger is first.)
#  2. steal: a registered evil worker 1 opens a second connection to server 0
#     as worker 0 ("ps9"). Server 0 closes the first connection of ps9, so the
#     real worker 0 reports server 0 lost at once: the job fails, loudly and
#     without hanging.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-ident.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ulimit -c 0 2>/dev/null
fail=0
bad() { echo "rawzmq_ident.sh: $*" >&2; fail=1; }

# 1. preclaim
log=$dir/preclaim
KVTEST_SCENARIO=data RAWZMQ_MODE=preclaim RAWZMQ_HOLD_S=20 \
timeout -k 10 150 "$b/tools/pslite-run" -s 1 -w 1 --van zmq --timeout 120 -- \
	sh -c 'if [ "$DMLC_ROLE" = scheduler ]; then "$1" & p=$!; "$2"; rc=$?; kill $p 2>/dev/null; wait $p; exit $rc; fi; sleep 1; exec "$2"' \
	sh "$b/tests/integration/rawzmq" "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || bad "preclaim: pslite-run exited $rc, expected 0"
for who in "kvtest scheduler 0: OK" "kvtest server 0: OK" "kvtest worker 0: OK"; do
	grep -q "$who" "$log" || bad "preclaim: no '$who'"
done
grep -q "rawzmq preclaim: holding" "$log" || bad "preclaim: the stranger did not run"
grep "\[scheduler\]" "$log" | grep -q "dropped a message (INSTANCE_BARRIER) from node [89]: not a node of this job" ||
	bad "preclaim: the scheduler did not log the stranger's barrier as dropped"
grep "\[scheduler\]" "$log" | grep -q "identity ps9 came on a second connection.*claimed it before node 9 was known here" ||
	bad "preclaim: the scheduler did not say that ps9 was claimed first by another connection"
[ $fail -eq 0 ] || { echo "----- preclaim -----" >&2; tail -n 80 "$log" >&2; }

# 2. steal
f0=$fail
log=$dir/steal
start=$(date +%s)
KVTEST_SCENARIO=soak KVTEST_ROUNDS=1000000 RAWZMQ_MODE=steal \
timeout -k 10 150 "$b/tools/pslite-run" -s 1 -w 2 --van zmq --timeout 120 --keep-going -- \
	sh -c 'if [ "$DMLC_ROLE" = worker ] && [ "$DMLC_RANK" = 1 ]; then exec "$1"; else exec "$2"; fi' \
	sh "$b/tests/integration/rawzmq" "$b/tests/integration/kvtest" >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))
[ $rc -ne 0 ] || bad "steal: pslite-run exited 0: the real worker 0 did not notice"
[ $rc -ne 124 ] && [ $took -lt 110 ] || bad "steal: the job hung ($took s, exit $rc)"
grep -q "rawzmq steal: pushed to server 0 as ps9" "$log" || bad "steal: the stranger did not push"
grep "\[server 0\]" "$log" | grep -q "identity ps9 came on a second connection" ||
	bad "steal: server 0 did not say that ps9 came on a second connection"
grep "\[worker 0\]" "$log" | grep -q "lost server 0" ||
	bad "steal: worker 0 did not report server 0 lost"
[ $fail -eq $f0 ] || { echo "----- steal -----" >&2; tail -n 80 "$log" >&2; }
echo "rawzmq_ident.sh: preclaim and steal done (steal ended in $took s, exit $rc)"
exit $fail
