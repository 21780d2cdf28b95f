#!/bin/sh
# A short libFuzzer pass (CI): each target of a build configured with
# --enable-fuzz CC=clang runs for FUZZ_SECONDS (30) from its checked-in
# corpus (tests/fuzz/corpus/<target>, copied: new inputs are not kept).
#   tests/fuzz/run.sh BUILDDIR
set -u
b=${1:?usage: run.sh BUILDDIR}
src=$(cd "$(dirname "$0")" && pwd)
secs=${FUZZ_SECONDS:-30}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-fuzzrun.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
for t in meta control; do
	mkdir -p "$dir/$t"
	cp "$src/corpus/$t"/* "$dir/$t/"
	echo "fuzz: $t for $secs s from $(ls "$src/corpus/$t" | wc -l) seeds"
	if ! "$b/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=4096 -timeout=10 \
		-print_final_stats=1 -artifact_prefix="$dir/" "$dir/$t" >"$dir/$t.log" 2>&1; then
		echo "fuzz: $t FAILED:" >&2
		tail -n 60 "$dir/$t.log" >&2
		for a in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-*; do
			[ -f "$a" ] && { echo "input $a:" >&2; od -A d -t x1 "$a" | head -n 40 >&2; }
		done
		fail=1
	else
		grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$dir/$t.log"
	fi
done
exit $fail
