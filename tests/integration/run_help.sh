#!/bin/sh
# pslite-run --help (issue 26): exits 0 and explains every option that
# pslite-run parses, each with a word on its default; a bad option still
# exits 2 and points at --help. The options are read from pslite-run.c
# itself, so that a new one without help fails here.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
b=${PSL_BUILDDIR:?}
s=${PSL_SRCDIR:-$b}
out=$(timeout 10 "$b/tools/pslite-run" --help) || { echo "run_help.sh: pslite-run --help exited $?" >&2; exit 1; }
fail=0
opts=$(grep -o 'strcmp(argv\[i\], "-[-a-z0-9]*")' "$s/tools/pslite-run.c" | sed 's/.*"\(.*\)")/\1/' |
	grep -v '^--$' | sort -u)
[ -n "$opts" ] || { echo "run_help.sh: found no options in pslite-run.c" >&2; exit 99; }
for o in $opts; do
	case $o in -h | --help) continue ;; esac
	printf '%s\n' "$out" | grep -q -- "^  $o\\b\\|, $o\\b\\|^  -[a-z] N, $o\\b" ||
		{ echo "run_help.sh: --help does not explain $o" >&2; fail=1; }
done
[ "$(printf '%s\n' "$out" | grep -c 'default')" -ge 10 ] ||
	{ echo "run_help.sh: --help gives fewer than 10 defaults" >&2; fail=1; }
timeout 10 "$b/tools/pslite-run" --no-such-option >/dev/null 2>"${TMPDIR:-/tmp}/run_help.$$"
rc=$?
grep -q -- "--help explains every option" "${TMPDIR:-/tmp}/run_help.$$" ||
	{ echo "run_help.sh: a bad option's usage does not point at --help" >&2; fail=1; }
rm -f "${TMPDIR:-/tmp}/run_help.$$"
[ $rc -eq 2 ] || { echo "run_help.sh: a bad option exited $rc, expected 2" >&2; fail=1; }
exit $fail
