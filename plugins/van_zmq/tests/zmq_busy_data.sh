#!/bin/sh
# kvtest's data scenario over van zmq with PS_BUSY_POLL=1 (the receive thread
# keeps polling for PS_BUSY_POLL_US after each message), with a short window
# so that the job also passes through the sleeps between polling spells.
PS_BUSY_POLL=1 PS_BUSY_POLL_US=50; export PS_BUSY_POLL PS_BUSY_POLL_US
exec "$PSL_SRCDIR/tests/integration/job.sh" zmq data 2 2
