#!/bin/sh
# core/ has no dependency circle (docs/core.md): from the symbols each
# object of the core library defines and uses (nm), every "file uses a
# function or variable of file" arrow, sorted with tsort(1); a circle fails
# the test and is printed with the symbols of its arrows. Upward paths
# (what the van delivers, a lost node, a customer's callbacks) go through
# function pointers, which are no arrows.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?}
command -v nm >/dev/null 2>&1 && command -v tsort >/dev/null 2>&1 ||
	{ echo "layers.sh: needs nm (binutils) and tsort (coreutils): skipped"; exit 77; }
objs=$(ls "$b"/core/.libs/*.o 2>/dev/null) || objs=$(ls "$b"/core/*.o 2>/dev/null) ||
	{ echo "layers.sh: no core objects under $b/core: build first" >&2; exit 99; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-layers.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for o in $objs; do
	f=$(basename "$o" .o)
	nm "$o" | awk -v f="$f" '$2 ~ /^[TDBRVC]$/ { print "D", f, $3 } $1 == "U" { print "U", f, $2 }'
done >"$dir/syms"
# "user definer symbol" for each use of another core file's symbol
awk '$1 == "D" { def[$3] = $2; next } { use[NR] = $2 " " $3 }
     END { for (i in use) { split(use[i], p, " "); d = def[p[2]];
		if (d != "" && d != p[1]) print p[1], d, p[2] } }' "$dir/syms" | sort -u >"$dir/edges"
files=$(awk '{ print $2 }' "$dir/syms" | sort -u | wc -l)
[ "$files" -ge 30 ] || { echo "layers.sh: only $files core objects found: a partial build?" >&2; exit 99; }
{ awk '{ print $2, $2 }' "$dir/syms" | sort -u; awk '{ print $2, $1 }' "$dir/edges" | sort -u; } |
	tsort >"$dir/order" 2>"$dir/loops"
if [ -s "$dir/loops" ]; then
	echo "layers.sh: core/ has a dependency circle; its arrows:" >&2
	grep -v 'input contains a loop' "$dir/loops" | sed 's/^tsort: //' | sort -u >"$dir/in"
	awk 'NR == FNR { in_loop[$1] = 1; next } ($1 in in_loop) && ($2 in in_loop) {
		printf "  %s -> %s: %s\n", $1, $2, $3 }' "$dir/in" "$dir/edges" >&2
	exit 1
fi
echo "layers.sh: $files core files, $(awk '{ print $1, $2 }' "$dir/edges" | sort -u | wc -l) arrows, no circle; bottom to top:"
tr '\n' ' ' <"$dir/order" | fold -s -w 78 | sed 's/^/  /'
echo
