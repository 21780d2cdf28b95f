#!/bin/sh
# kvtest over van fabric on the sockets provider: functional only (slow)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
FI_PROVIDER=sockets; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/job.sh" fabric data 1 1
