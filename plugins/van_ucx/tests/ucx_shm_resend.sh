#!/bin/sh
# kvtest's resend scenario over van ucx, UCX restricted to shared memory
# (posix and sysv segments, cross-memory attach, self for loopback).
UCX_TLS=posix,sysv,cma,self; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/job.sh" ucx resend 2 2
