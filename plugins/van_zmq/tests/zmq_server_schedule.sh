#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/server_job.sh" zmq schedule
