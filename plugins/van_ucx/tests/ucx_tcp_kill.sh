#!/bin/sh
# kvtest's kill scenario over van ucx, UCX restricted to TCP.
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/job.sh" ucx kill 2 2
