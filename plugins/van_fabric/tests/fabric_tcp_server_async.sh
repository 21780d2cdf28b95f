#!/bin/sh
# pslite-server + pslite-check over van fabric on the tcp provider, loopback
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/server_job.sh" fabric async
