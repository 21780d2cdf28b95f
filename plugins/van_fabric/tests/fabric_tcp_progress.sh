#!/bin/sh
# pslite-vantest's progress case on van fabric (tcp provider): van fabric has
# progress(), so the case must find answers delivered on the driving thread
# (the case alone passes a van without the entry).
. "${PSL_SRCDIR:-$(dirname "$0")/../../..}/tests/vantest/common.sh"
FI_PROVIDER=tcp; export FI_PROVIDER
so=$(find_van fabric)
[ -n "$so" ] || { echo "SKIP: van_fabric.so was not built"; exit 77; }
out=$("$vantest" --timeout 60 --verbose "$so" progress 2>&1)
rc=$?
echo "$out" | grep -v '^ *\[' | tail -20
[ "$rc" -eq 0 ] || exit 1
echo "$out" | grep -q '[1-9][0-9]* of [0-9]* answers delivered on the driving thread' || {
	echo "FAIL: van fabric did not deliver answers on the thread that called progress()"
	exit 1
}
