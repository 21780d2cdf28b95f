#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/exit_codes.sh" zmq
