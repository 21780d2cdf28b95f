#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/job.sh" zmq soak 2 2
