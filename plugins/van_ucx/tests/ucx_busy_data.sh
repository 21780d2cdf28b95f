#!/bin/sh
# kvtest's data scenario over van ucx with PS_BUSY_POLL=1 (the progress thread
# keeps polling UCX for PS_BUSY_POLL_US after each message, yielding the CPU,
# before it sleeps on its event fd again), on UCX's default transports.
PS_BUSY_POLL=1; export PS_BUSY_POLL
unset UCX_TLS
exec "$PSL_SRCDIR/tests/integration/job.sh" ucx data 2 2
