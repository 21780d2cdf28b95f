# Sourced by the vantest_*.sh scripts: runs pslite-vantest from the build
# tree on one van. make check sets PSL_BUILDDIR and PS_VAN_PATH (by hand:
# tests/testenv.sh).
set -u
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
vantest=$PSL_BUILDDIR/tools/pslite-vantest

# find_van NAME: prints the path of van_NAME.so in PS_VAN_PATH, or nothing
find_van() {
	local d IFS=:
	for d in ${PS_VAN_PATH:-}; do
		if [ -f "$d/van_$1.so" ]; then
			echo "$d/van_$1.so"
			return
		fi
	done
}

# run_vantest NAME [pslite-vantest options...]: skips (77) when the van was
# not built; otherwise pslite-vantest's verdict
run_vantest() {
	local name=$1 so
	shift
	so=$(find_van "$name")
	if [ -z "$so" ]; then
		echo "SKIP: van_$name.so was not built (not in PS_VAN_PATH=${PS_VAN_PATH:-})"
		exit 77
	fi
	"$vantest" --timeout 120 "$@" "$so"
}

# run_progress NAME: pslite-vantest's progress case on a van that has
# progress(): it must pass and deliver answers on the thread that drives (the
# case alone passes a van without the entry)
run_progress() {
	local so out rc
	so=$(find_van "$1")
	[ -n "$so" ] || { echo "SKIP: van_$1.so was not built"; exit 77; }
	out=$("$vantest" --timeout 60 --verbose "$so" progress 2>&1)
	rc=$?
	echo "$out" | grep -v '^ *\[' | tail -20
	[ "$rc" -eq 0 ] || exit 1
	echo "$out" | grep -q '[1-9][0-9]* of [0-9]* answers delivered on the driving thread' || {
		echo "FAIL: van $1 did not deliver answers on the thread that called progress()"
		exit 1
	}
}
