#!/bin/sh
# kvtest's soak scenario over van ucx, UCX restricted to TCP.
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/job.sh" ucx soak 2 2
