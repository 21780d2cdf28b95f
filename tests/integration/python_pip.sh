#!/bin/sh
# pip install ./python works offline and leaves the source tree as it was:
# pip install --no-index (no network: pip's build isolation must need
# nothing it would download) into a temporary --target, for configure's
# interpreter and Debian's /usr/bin/python3 where they have pip; then the
# package imports from there, and python/ has no new file (no build/, no
# *.egg-info; __pycache__ aside, which any import may write).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
s=${PSL_SRCDIR:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pslite-pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "python_pip.sh: $*" >&2; exit 1; }
listing() { (cd "$s/python" && find . -name __pycache__ -prune -o -print | LC_ALL=C sort); }

cfg=$(sed -n 's/^PSL_PYTHON = //p' "$b/Makefile")
n=0
for py in $cfg /usr/bin/python3; do
	[ -x "$py" ] || command -v "$py" >/dev/null || continue
	"$py" -m pip --version >/dev/null 2>&1 || { echo "python_pip.sh: $py has no pip: skipped"; continue; }
	n=$((n + 1))
	listing >"$tmp/before"
	t=$tmp/target$n
	PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 timeout 120 "$py" -m pip install -q \
		--no-index --no-deps --target "$t" "$s/python" >"$tmp/log" 2>&1 ||
		{ cat "$tmp/log"; fail "$py -m pip install --no-index ./python failed"; }
	listing >"$tmp/after"
	diff "$tmp/before" "$tmp/after" >"$tmp/diff" ||
		{ cat "$tmp/diff"; fail "pip install ./python ($py) wrote into $s/python"; }
	(cd "$tmp" && PYTHONPATH=$t "$py" -c 'import sys, pslite, pslite.fserver
assert pslite.__file__.startswith(sys.argv[1]), pslite.__file__
print("python_pip.sh: imported", pslite.__file__)' "$t") || fail "$py cannot import what pip installed in $t"
	ls "$t" | grep -q '^pslite-.*\.dist-info$' || fail "no pslite-*.dist-info in $t"
done
[ $n -gt 0 ] || { echo "python_pip.sh: SKIP: no python3 with pip"; exit 77; }
echo "python_pip.sh: OK ($n interpreters)"
