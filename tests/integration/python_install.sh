#!/bin/sh
# make install puts the Python package where configure's interpreter imports
# from (python/pythondir.py): make install DESTDIR=... of this build, then
# that directory must be on the interpreter's sys.path (PYTHONPATH aside)
# and `import pslite` from it must load the installed package with its note
# of the library's directory. The same for Debian's /usr/bin/python3 where
# it is another interpreter (the package installed where pythondir.py says
# for it), and for a virtual environment as the prefix: there the venv's
# python imports it with no PYTHONPATH at all. A prefix that the
# interpreter does not search gets configure's warning naming PYTHONPATH.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
s=${PSL_SRCDIR:?}
mkvar() { sed -n "s/^$1 = //p" "$b/Makefile"; }
py=$(mkvar PSL_PYTHON)
[ -n "$(mkvar PSL_PYTHONDIR)" ] || { echo "python_install.sh: SKIP: configured without Python"; exit 77; }
prefix=$(mkvar prefix)
libdir=$(mkvar libdir | sed "s|\${exec_prefix}|$prefix|; s|\$(exec_prefix)|$prefix|")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pslite-pyinst.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "python_install.sh: $*" >&2; exit 1; }

# DIR on PY's sys.path without PYTHONPATH?
searched() {
	"$1" -E -c 'import os, site, sys
d = os.path.realpath(sys.argv[1])
sys.exit(0 if d in {os.path.realpath(p) for p in sys.path + site.getsitepackages() if p} else 1)' "$2"
}
# import pslite with PY from DIR (under DESTDIR D): the installed files
imports() {
	PYTHONPATH=$3$2 "$1" -c 'import os, sys, pslite
from pslite import _libdir
want = os.path.realpath(os.path.join(sys.argv[1], "pslite", "__init__.py"))
assert os.path.realpath(pslite.__file__) == want, (pslite.__file__, want)
assert _libdir.LIBDIR == sys.argv[2], (_libdir.LIBDIR, sys.argv[2])
assert hasattr(pslite, "server_key_range")
print("imported", pslite.__file__)' "$3$2" "$libdir"
}

# 1. this build's make install, for configure's interpreter
timeout 300 make -s -C "$b" install DESTDIR="$tmp/d" >"$tmp/log" 2>&1 ||
	{ tail -n 20 "$tmp/log"; fail "make install DESTDIR=$tmp/d failed"; }
init=$(cd "$tmp/d" && find . -path '*/pslite/__init__.py' | head -n 1)
[ -n "$init" ] || fail "make install put no pslite/__init__.py under DESTDIR"
dir=$(dirname "$(dirname "${init#.}")")
# the directory the interpreter names for this prefix (python/pythondir.py)
want=$("$py" -E "$s/python/pythondir.py" "$prefix" $(mkvar PSL_PYTHON_PREFIX_DEFAULT) 2>/dev/null |
	sed "s|\${prefix}|$prefix|")
[ "$want" = "$dir" ] || fail "make install put the package in $dir; $py says $want"
# (a prefix that the interpreter searches nowhere, as make distcheck's: then
# configure must have warned, naming PYTHONPATH)
if ! searched "$py" "$dir"; then
	"$py" -E "$s/python/pythondir.py" "$prefix" >/dev/null 2>"$tmp/warn"
	grep -q "does not import from .*PYTHONPATH=" "$tmp/warn" ||
		fail "make install put the package in $dir, which $py does not import from (its sys.path: $("$py" -E -c 'import sys; print(sys.path)'))"
	echo "python_install.sh: prefix $prefix is not searched by $py; configure warns: $(cat "$tmp/warn")"
fi
imports "$py" "$dir" "$tmp/d" || fail "$py cannot import pslite from $tmp/d$dir"
echo "python_install.sh: $py imports pslite from $dir"

# 2. Debian's python3 where it is another interpreter: where pythondir.py
# says for it, installed by the same rules
deb=/usr/bin/python3
if [ -x "$deb" ] && [ "$("$deb" -c 'import os, sys; print(os.path.realpath(sys.executable))')" != \
	"$("$py" -c 'import os, sys; print(os.path.realpath(sys.executable))')" ]; then
	pd=$("$deb" -E "$s/python/pythondir.py" "$prefix" default | sed "s|\${prefix}|$prefix|")
	{ make -s -C "$b" install-pslitepyDATA DESTDIR="$tmp/deb" \
		PSL_PYTHONDIR="$pd" &&
		make -s -C "$b" install-data-hook DESTDIR="$tmp/deb" \
		PSL_PYTHONDIR="$pd"; } >"$tmp/log" 2>&1 || { tail "$tmp/log"; fail "installing for $deb failed"; }
	searched "$deb" "$pd" || fail "for $deb the package went to $pd, which it does not import from"
	imports "$deb" "$pd" "$tmp/deb" || fail "$deb cannot import pslite from $tmp/deb$pd"
	echo "python_install.sh: $deb imports pslite from $pd"
fi

# 3. a virtual environment as the prefix: its python imports it as it is
if "$py" -m venv --without-pip "$tmp/venv" >"$tmp/log" 2>&1; then
	vpy=$tmp/venv/bin/python3
	vd=$("$vpy" -E "$s/python/pythondir.py" "$tmp/venv" 2>"$tmp/warn" | sed "s|\${prefix}|$tmp/venv|")
	[ -s "$tmp/warn" ] && fail "a venv prefix got a warning: $(cat "$tmp/warn")"
	{ make -s -C "$b" install-pslitepyDATA prefix="$tmp/venv" \
		PSL_PYTHONDIR="$vd" &&
		make -s -C "$b" install-data-hook prefix="$tmp/venv" \
		PSL_PYTHONDIR="$vd"; } >"$tmp/log" 2>&1 || { tail "$tmp/log"; fail "installing into the venv failed"; }
	(cd "$tmp" && env -u PYTHONPATH "$vpy" -c 'import pslite; print("venv imported", pslite.__file__)') ||
		fail "the venv's python cannot import pslite from $vd"
else
	echo "python_install.sh: no venv module for $py: venv case skipped ($(tail -n 1 "$tmp/log"))"
fi

# 4. a prefix the interpreter does not search: ${prefix}/lib/..., and a
# warning that names PYTHONPATH
out=$("$py" -E "$s/python/pythondir.py" "$tmp/elsewhere" 2>"$tmp/warn")
case $out in "\${prefix}/lib/"*) ;; *) fail "prefix $tmp/elsewhere: got $out" ;; esac
grep -q "PYTHONPATH=$tmp/elsewhere/lib/" "$tmp/warn" || fail "prefix $tmp/elsewhere: no PYTHONPATH advice: $(cat "$tmp/warn")"
echo "python_install.sh: OK"
