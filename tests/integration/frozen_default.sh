#!/bin/sh
# A frozen server with no PS_HEARTBEAT_* set (issue 26, case 3): the default
# heartbeats find it, and the worker fails with a line naming server 0 and
# PS_HEARTBEAT_TIMEOUT within the default timeout (20 s) plus slack, van zmq.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
FROZEN_HB=default; export FROZEN_HB
exec "$PSL_SRCDIR/tests/integration/frozen.sh" zmq
