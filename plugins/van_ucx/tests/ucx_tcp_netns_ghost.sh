#!/bin/sh
# recovery over van ucx (tcp), in network namespaces: a cut-off server that
# comes back after it was declared lost is told to stop
# (tests/integration/netns_cutoff.sh ucx ghost; skips without root)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
exec "$PSL_SRCDIR/tests/integration/netns_cutoff.sh" ucx ghost
