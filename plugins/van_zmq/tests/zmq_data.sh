#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/job.sh" zmq data 2 2
