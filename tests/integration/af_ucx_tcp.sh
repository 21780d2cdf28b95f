#!/bin/sh
# UCX restricted to TCP
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/af_run.sh" ucx
