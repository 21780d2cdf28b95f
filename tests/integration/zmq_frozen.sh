#!/bin/sh
# a frozen server over van zmq, 4 MiB values
FROZEN_BYTES=4194304; export FROZEN_BYTES
exec "$PSL_SRCDIR/tests/integration/frozen.sh" zmq
