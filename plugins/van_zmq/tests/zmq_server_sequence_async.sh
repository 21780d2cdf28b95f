#!/bin/sh
exec "$PSL_SRCDIR/tests/integration/server_sequence.sh" zmq async
