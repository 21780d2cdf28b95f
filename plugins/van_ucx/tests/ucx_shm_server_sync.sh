#!/bin/sh
# pslite-server + pslite-check over van ucx on shared memory, loopback
UCX_TLS=posix,sysv,cma,self; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/server_job.sh" ucx sync
