#!/bin/sh
# Runs the libFuzzer target (./configure --enable-fuzz) for a bounded number
# of inputs, starting from the driver's seed metas.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-fuzz.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$b/tests/fuzz/fuzz_meta_driver" --write-seeds "$dir" || exit 1
exec "$b/tests/fuzz/fuzz_meta" -runs="${FUZZ_RUNS:-200000}" -max_len=4096 -max_total_time=60 \
	-print_final_stats=1 "$dir"
