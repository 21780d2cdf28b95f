#!/bin/sh
# Instance groups of 2 and 4, one process per instance (tests/integration/group_job.sh), over van zmq
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
exec "$PSL_SRCDIR/tests/integration/group_job.sh" zmq
