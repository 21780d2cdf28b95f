#!/bin/sh
# kvtest's data scenario over van ucx with PS_CALLER_PROGRESS=1 (waiting
# workers drive the UCX worker themselves), over shared memory, then TCP.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
PS_CALLER_PROGRESS=1; export PS_CALLER_PROGRESS
UCX_TLS=posix,sysv,cma,self "$PSL_SRCDIR/tests/integration/job.sh" ucx data 2 2 || exit $?
UCX_TLS=tcp exec "$PSL_SRCDIR/tests/integration/job.sh" ucx data 2 2
