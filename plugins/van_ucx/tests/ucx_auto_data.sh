#!/bin/sh
# kvtest's data scenario over van ucx with PS_BUSY_POLL=auto (the progress
# thread polls UCX between messages only while they come back to back, for a
# window sized by the gaps between them, else sleeps on its event fd), over
# UCX shared memory, where the server answers one worker's requests in turn.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
PS_BUSY_POLL=auto UCX_TLS=posix,sysv,cma,self; export PS_BUSY_POLL UCX_TLS
exec "$PSL_SRCDIR/tests/integration/job.sh" ucx data 2 2
