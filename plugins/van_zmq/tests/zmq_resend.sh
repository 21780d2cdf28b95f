#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/job.sh" zmq resend 2 2
