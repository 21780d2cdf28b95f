#!/bin/sh
# kvtest's data scenario over van zmq with PS_CALLER_PROGRESS=1: waiting
# workers read their ROUTER themselves (zmq_progress.c).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
PS_CALLER_PROGRESS=1; export PS_CALLER_PROGRESS
exec "$PSL_SRCDIR/tests/integration/job.sh" zmq data 2 2
