#!/bin/sh
# kvtest's data scenario over van fabric (tcp provider) with PS_BUSY_POLL=auto:
# the progress thread polls the completion queue between completions only
# while they come back to back, for a window sized by the gaps between them,
# else sleeps on the queue's fd.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
PS_BUSY_POLL=auto FI_PROVIDER=tcp; export PS_BUSY_POLL FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/job.sh" fabric data 2 2
