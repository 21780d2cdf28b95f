#!/bin/sh
# The Python package over van ucx (tcp): the cases that go through the van
# differently (tests/integration/python_job.sh VAN van); python_zmq.sh runs all
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/python_job.sh" ucx van
