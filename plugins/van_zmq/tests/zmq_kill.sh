#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/job.sh" zmq kill 2 2
