#!/bin/sh
# pslite-server + pslite-check over van ucx on TCP, loopback
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/server_job.sh" ucx sync
