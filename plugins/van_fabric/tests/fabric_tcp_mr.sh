#!/bin/sh
# kvtest (soak: the same buffers again and again) over van fabric on the tcp
# provider with every buffer registered (PS_FABRIC_MR=1), as on a provider
# that needs FI_MR_LOCAL; the registration cache must hit.
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
log=$(mktemp "${TMPDIR:-/tmp}/pslite-fabric-mr.XXXXXX")
trap 'rm -f "$log"' EXIT
FI_PROVIDER=tcp PS_FABRIC_MR=1 KVTEST_SCENARIO=soak KVTEST_ROUNDS=60 PS_VERBOSE=1
export FI_PROVIDER PS_FABRIC_MR KVTEST_SCENARIO KVTEST_ROUNDS PS_VERBOSE
"$b/tools/pslite-run" -s 2 -w 2 --van fabric --timeout 240 -- "$b/tests/integration/kvtest" \
	>"$log" 2>&1
rc=$?
fail=0
[ $rc -eq 0 ] || { echo "fabric_tcp_mr.sh: pslite-run exited $rc" >&2; fail=1; }
n=$(grep -c "kvtest [a-z]* [0-9]: OK" "$log")
[ "$n" -eq 5 ] || { echo "fabric_tcp_mr.sh: $n of 5 nodes said OK" >&2; fail=1; }
# every other round pushes the same buffers without a copy (2 pushes to each
# of 2 servers): at least KVTEST_ROUNDS lookups must hit
for w in 0 1; do
	line=$(grep "^\[worker $w\].*registration cache:" "$log")
	hits=$(echo "$line" | sed -n 's/.*cache: \([0-9]*\) hits, \([0-9]*\) misses.*/\1/p')
	miss=$(echo "$line" | sed -n 's/.*cache: \([0-9]*\) hits, \([0-9]*\) misses.*/\2/p')
	if [ -z "$hits" ] || [ -z "$miss" ] || [ "$hits" -lt "$KVTEST_ROUNDS" ]; then
		echo "fabric_tcp_mr.sh: worker $w: registration cache '$line'" >&2
		fail=1
	fi
done
if grep -q "FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$log"; then
	echo "fabric_tcp_mr.sh: a node reported a failure or a sanitizer error" >&2
	fail=1
fi
[ $fail -eq 0 ] || tail -n 100 "$log" >&2
exit $fail
