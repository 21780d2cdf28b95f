#!/bin/sh
# Runs pslite-afbench (the Attention-FFN batch benchmark, short form, with its
# data checks) as one job on loopback and checks that every node says OK.
#   af_job.sh VAN SERVERS WORKERS [pslite-afbench options...]
# Needs PSL_BUILDDIR (set by make check).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
van=$1 S=$2 W=$3
shift 3
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-af.XXXXXX")
log=$dir/log
trap 'rm -rf "$dir"' EXIT

"$b/tools/pslite-run" -s "$S" -w "$W" --van "$van" --timeout 240 -- \
	"$b/tools/pslite-afbench" --json "$@" >"$log" 2>&1
rc=$?
fail=0
expect() {
	if ! grep -q "afbench $1: OK" "$log"; then
		echo "af_job.sh: $van: no 'afbench $1: OK'" >&2
		fail=1
	fi
}
expect "scheduler 0"
i=0; while [ $i -lt "$W" ]; do expect "worker $i"; i=$((i + 1)); done
i=0; while [ $i -lt "$S" ]; do expect "server $i"; i=$((i + 1)); done
[ $rc -eq 0 ] || { echo "af_job.sh: pslite-run exited $rc" >&2; fail=1; }
# every worker checked its data and found no wrong word
n=$(grep -c '"tool":"pslite-afbench".*"bad_words":0,"failed":0' "$log")
[ "$n" -eq "$W" ] || { echo "af_job.sh: $n of $W workers report clean data" >&2; fail=1; }
if grep -q "ERROR\|FAILED\|AddressSanitizer\|runtime error:\|LeakSanitizer" "$log"; then
	echo "af_job.sh: a node reported an error, a failure or a sanitizer finding" >&2
	fail=1
fi
if [ $fail -ne 0 ]; then
	echo "----- output of the job ($van, $S servers, $W workers: $*) -----" >&2
	tail -n 100 "$log" >&2
else
	grep '"tool":"pslite-afbench"' "$log"
fi
exit $fail
