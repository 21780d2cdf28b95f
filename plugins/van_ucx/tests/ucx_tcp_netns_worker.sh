#!/bin/sh
# recovery over van ucx (tcp), in network namespaces: a host cut off and
# reconnected: its worker exits, a new one takes its place
# (tests/integration/netns_cutoff.sh ucx worker; skips without root)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
exec "$PSL_SRCDIR/tests/integration/netns_cutoff.sh" ucx worker
