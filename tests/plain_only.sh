# Sourced by a test that CI runs in the plain build only: in a sanitizer
# build (--enable-sanitizers) it skips (77) with one line, unless
# PSL_SAN_ALL=1. Needs me (the script's name) and PSL_BUILDDIR.
if [ -z "${PSL_SAN_ALL:-}" ] && grep -q 'fsanitize=address' "$PSL_BUILDDIR/Makefile" 2>/dev/null; then
	echo "$me: SKIP: sanitizer build: the plain build runs it (PSL_SAN_ALL=1 runs it here)"
	exit 77
fi
