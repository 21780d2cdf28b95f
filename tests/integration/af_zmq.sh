#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/af_run.sh" zmq
