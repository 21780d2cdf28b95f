#!/bin/sh
# a frozen server over van ucx (TCP), 4 MiB values: rendezvous into lent
# buffers are in flight when it freezes
UCX_TLS=tcp; export UCX_TLS
FROZEN_BYTES=4194304; export FROZEN_BYTES
exec "$PSL_SRCDIR/tests/integration/frozen.sh" ucx
