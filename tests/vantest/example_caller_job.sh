#!/bin/sh
# kvtest's data scenario over the example van with PS_CALLER_PROGRESS=1:
# waiting workers read the van's sockets themselves (progress()).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
PS_VAN_PATH=$PSL_BUILDDIR/examples/van_example/.libs PS_CALLER_PROGRESS=1
export PS_VAN_PATH PS_CALLER_PROGRESS
exec "$PSL_SRCDIR/tests/integration/job.sh" example data 2 2
