#!/bin/sh
# kvtest's data scenario over van fabric (tcp provider) with
# PS_CALLER_PROGRESS=1: waiting workers read the completion queue themselves.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
PS_CALLER_PROGRESS=1 FI_PROVIDER=tcp; export PS_CALLER_PROGRESS FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/job.sh" fabric data 2 2
