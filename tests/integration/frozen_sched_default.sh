#!/bin/sh
# A frozen scheduler with no PS_HEARTBEAT_* set: the server and the worker
# find it by the default heartbeats and end with a line naming the scheduler
# and PS_HEARTBEAT_TIMEOUT within the default timeout (20 s) plus slack, van
# zmq.
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
FROZEN_HB=default FROZEN_NODE=scheduler; export FROZEN_HB FROZEN_NODE
exec "$PSL_SRCDIR/tests/integration/frozen.sh" zmq
