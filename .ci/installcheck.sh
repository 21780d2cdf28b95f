#!/bin/bash
# What a user and a van writer get, checked from a release tarball:
#   1. make dist in BUILDDIR (a configured pslite build, default: the source
#      tree), unpack the tarball in a temporary folder, configure it with
#      --prefix=<that folder>/prefix, make, make install;
#   2. copy examples/van_example out of the unpacked tree and build it there
#      with nothing but pkg-config (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig);
#   3. run the installed pslite-vantest on it (its Makefile's check target);
#   4. run a job over it: the installed pslite-run and pslite-bench with
#      DMLC_ENABLE_RDMA=example and PS_VAN_PATH (data checked);
#   5. make install it into pslite's van folder (pkg-config's vandir) and
#      check that the installed pslite-info finds it there without
#      PS_VAN_PATH, and that pslite-vantest finds an installed van by name;
#   6. the installed Python package imports and loads the installed
#      libpslite.so.0 without PSLITE_LIB.
# Prints why and exits non-zero on the first failure. Run by .ci/run after
# the plain build's make check; can be run alone:
#   .ci/installcheck.sh [BUILDDIR]
# KEEP=1 keeps the temporary folder.
set -uo pipefail

root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
build=$(cd "${1:-$root}" && pwd) || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pslite-installcheck.XXXXXX") || exit 1
log=$tmp/log

step() { printf '=== installcheck: %s (%ds)\n' "$*" $(($(date +%s) - t0)); }
fail() {
	failed_keep=1
	echo "installcheck: FAILED: $*" >&2
	if [ -s "$log" ]; then
		echo "----- last lines of its output ($log) -----" >&2
		tail -n 40 "$log" >&2
	fi
	echo "installcheck: kept $tmp" >&2
	exit 1
}
cleanup() { [ "${KEEP:-0}" = 1 ] || [ -n "${failed_keep:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
# run LABEL CMD...: runs CMD with its output in $log
run() {
	local label=$1
	shift
	"$@" >"$log" 2>&1 || { fail "$label: $*"; }
}

[ -f "$build/Makefile" ] ||
	{ fail "$build is not a configured pslite build (run ./configure first)"; }

step "make dist in $build"
run "make dist" make -C "$build" dist
tarball=$(ls -t "$build"/pslite-*.tar.gz 2>/dev/null | head -n1)
[ -n "$tarball" ] || { fail "make dist made no pslite-*.tar.gz in $build"; }
echo "tarball: $tarball ($(du -k "$tarball" | cut -f1) KiB)"

step "unpack, configure --prefix=$tmp/prefix"
run "unpack" tar -xzf "$tarball" -C "$tmp"
src=$tmp/$(basename "$tarball" .tar.gz)
[ -x "$src/configure" ] || { fail "the tarball holds no $(basename "$src")/configure"; }
prefix=$tmp/prefix
run "configure the tarball" sh -c "cd '$src' && ./configure --prefix='$prefix'"

step "make -j$jobs, make install"
run "make the tarball" make -C "$src" -j"$jobs"
run "make install" make -C "$src" install

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
vandir=$(pkg-config --variable=vandir pslite) || { fail "pkg-config cannot find pslite.pc in $PKG_CONFIG_PATH"; }
[ "$vandir" = "$prefix/lib/pslite" ] || { fail "pkg-config's vandir is $vandir, expected $prefix/lib/pslite"; }
[ -x "$prefix/bin/pslite-vantest" ] || { fail "pslite-vantest was not installed"; }

step "build examples/van_example out of tree"
ex=$tmp/van_example
run "copy the example" cp -r "$src/examples/van_example" "$ex"
run "build the example (make -C $ex)" make -C "$ex"
[ -f "$ex/van_example.so" ] || { fail "no van_example.so"; }

step "installed pslite-vantest on van_example.so"
run "pslite-vantest on the example (make -C $ex check)" make -C "$ex" check
grep -E '^(FAIL|SKIP|[0-9]+ passed)' "$log"

step "a job over the example van (PS_VAN_PATH)"
run "pslite-run -s 1 -w 1 --van example -- pslite-bench 65536 1 1 --seconds 2" \
	env PS_VAN_PATH="$ex" DMLC_ENABLE_RDMA=example "$prefix/bin/pslite-run" -s 1 -w 1 \
	--timeout 120 -- "$prefix/bin/pslite-bench" 65536 1 1 --seconds 2
summary=$(grep 'pslite-bench summary' "$log")
echo "$summary"
case $summary in
*" 0 errors, data checked"*) ;;
*) fail "the job's summary is not '0 errors, data checked'" ;;
esac

step "make install the example into vandir, found without PS_VAN_PATH"
run "make -C $ex install" make -C "$ex" install
[ -f "$vandir/van_example.so" ] || { fail "van_example.so is not in $vandir"; }
run "pslite-info" env -u PS_VAN_PATH "$prefix/bin/pslite-info"
grep -q "example  *ok  *$vandir/van_example.so" "$log" ||
	{ fail "the installed pslite-info does not find van example in $vandir"; }
if [ -f "$vandir/van_zmq.so" ]; then
	run "pslite-vantest zmq load connect (an installed van by name)" \
		env -u PS_VAN_PATH "$prefix/bin/pslite-vantest" zmq load connect
fi

step "the installed Python package finds the installed library"
pkg=$(find "$prefix" -path "*/pslite/__init__.py" 2>/dev/null | head -n1)
if [ -z "$pkg" ]; then
	if grep -q "^PSL_PYTHONDIR = .\+" "$src/Makefile"; then
		fail "make install put no pslite/__init__.py under $prefix"
	fi
	echo "not installed: configure found no python3"
else
	py=$(sed -n 's/^PSL_PYTHON = //p' "$src/Makefile")
	run "import the installed package" env -u PSLITE_LIB PYTHONPATH="$(dirname "$(dirname "$pkg")")" \
		"${py:-python3}" -c "import pslite, pslite.fserver
assert pslite._installed_lib() == '$prefix/lib/libpslite.so.0', pslite._installed_lib()
print('cuda:', pslite.cuda_describe())"
	cat "$log"
fi

step "done: tarball builds, installs, the example van builds out of tree, passes pslite-vantest and runs a job, the Python package loads"
