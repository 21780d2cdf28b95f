#!/bin/sh
# kvtest's data scenario over van zmq with PS_BUSY_POLL=1 (the receive thread
# keeps polling for PS_BUSY_POLL_US after each message), with a short window
# so that the job also passes through the sleeps between polling spells.
# PS_ZMQ_BUSY_POLL_MIN_CPUS=1: poll on a machine of any size (by default van
# zmq does not poll on fewer CPUs than its io threads + 2).
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
PS_BUSY_POLL=1 PS_BUSY_POLL_US=50 PS_ZMQ_BUSY_POLL_MIN_CPUS=1
export PS_BUSY_POLL PS_BUSY_POLL_US PS_ZMQ_BUSY_POLL_MIN_CPUS
exec "$PSL_SRCDIR/tests/integration/job.sh" zmq data 2 2
