#!/bin/sh
# The ps-lite C++ API's headers (include/ps, include/dmlc) compile as C++14
# with -Wall -Wextra -Wshadow -Werror: each on its own with configure's C++
# compiler (PSL_CXX), and the C++ test programs (every template used) with
# clang++ too where it is installed. Skips (77) without a C++14 compiler.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
set -u
b=${PSL_BUILDDIR:?run through make check, or set PSL_BUILDDIR}
s=${PSL_SRCDIR:?}
[ -x "$b/tests/cxx/sarray_test" ] ||
	{ echo "headers.sh: no C++ test programs (configure found no C++14 compiler): skipped"; exit 77; }
flags="-std=c++14 -Wall -Wextra -Wshadow -Werror -fsyntax-only -I$s/include"
dir=$(mktemp -d "${TMPDIR:-/tmp}/pslite-hdr.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
n=0
for h in $(cd "$s/include" && find ps dmlc -name '*.h' | sort); do
	printf '#include <%s>\n' "$h" >"$dir/one.cc"
	# shellcheck disable=SC2086
	if ! ${PSL_CXX:-c++} $flags "$dir/one.cc" >"$dir/out" 2>&1; then
		echo "headers.sh: <$h> alone does not compile with ${PSL_CXX:-c++}:" >&2
		head -20 "$dir/out" >&2
		fail=1
	fi
	n=$((n + 1))
done
[ "$n" -ge 12 ] || { echo "headers.sh: found $n headers under include/ps and include/dmlc" >&2; fail=1; }
if command -v clang++ >/dev/null 2>&1; then
	for f in kv_app_test.cc bench_test.cc sarray_test.cc check_test.cc api_test.cc; do
		# shellcheck disable=SC2086
		clang++ $flags "$s/tests/cxx/$f" >"$dir/out" 2>&1 ||
			{ echo "headers.sh: clang++ on tests/cxx/$f:" >&2; head -20 "$dir/out" >&2; fail=1; }
	done
	with=" and clang++"
else
	with=" (no clang++ here)"
fi
[ $fail -eq 0 ] && echo "headers.sh: OK: $n headers alone with ${PSL_CXX:-c++}, the tests with it$with"
exit $fail
