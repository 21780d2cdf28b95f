#!/bin/sh
# kvtest's data scenario over van fabric (tcp provider) with PS_BUSY_POLL=1:
# the progress thread polls the completion queue for PS_BUSY_POLL_US after
# each completion, yielding the CPU, then sleeps on the queue's fd again.
PS_BUSY_POLL=1 FI_PROVIDER=tcp; export PS_BUSY_POLL FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/job.sh" fabric data 2 2
