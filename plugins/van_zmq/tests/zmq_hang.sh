#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/job.sh" zmq hang 2 2
