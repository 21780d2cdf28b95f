#!/bin/sh
# pslite-vantest must fail vans that break a promise, naming the case:
# broken copies of the example van (tests/vantest/van_broken.c).
. "${PSL_SRCDIR:-$(dirname "$0")/../..}/tests/vantest/common.sh"
dir=$PSL_BUILDDIR/tests/vantest/.libs
# the harness against its broken test vans: the plain build's test
me=broken.sh
. "$PSL_SRCDIR/tests/plain_only.sh"
out=${TMPDIR:-/tmp}/vantest-broken.$$
trap 'rm -f "$out"' EXIT
fails=0

# expect VAN CASE WHY [OPTIONS...]: pslite-vantest VAN CASE exits 1 with
# "FAIL CASE: ...WHY..."
expect() {
	van=$1 case=$2 why=$3
	shift 3
	"$vantest" "$@" "$dir/van_$van.so" "$case" >"$out" 2>&1
	rc=$?
	if [ $rc = 1 ] && grep -q "^FAIL $case: .*$why" "$out"; then
		echo "ok: van_$van: $(grep "^FAIL $case" "$out")"
	else
		echo "NOT CAUGHT: van_$van, case $case (exit $rc, expected 1 and FAIL $case: ...$why):"
		sed 's/^/  | /' "$out"
		fails=$((fails + 1))
	fi
}

expect broken_done send-done "send_done 2 times"
expect broken_done fini-pending "send_done 2 times"
expect broken_order order "order lost"
expect broken_seg segments "segments, sent"
expect broken_down peer-down "no PSL_VAN_PEER_DOWN"
expect broken_down peer-killed "no PSL_VAN_PEER_DOWN"
expect broken_hang meta-only "hung" --timeout 5
# and the whole van still passes what it does not break
"$vantest" "$dir/van_broken_seg.so" load meta-only >"$out" 2>&1 ||
	{ echo "van_broken_seg fails load or meta-only:"; cat "$out"; fails=$((fails + 1)); }
[ $fails = 0 ]
