#!/bin/sh
# Instance groups run whole in one process (psl_start_group) beside one
# instance per process (tests/integration/inst_job.sh), over van ucx (tcp)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/inst_job.sh" ucx
