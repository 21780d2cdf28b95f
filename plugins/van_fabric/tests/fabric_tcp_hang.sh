#!/bin/sh
# kvtest scenario hang over van fabric on the tcp provider (ofi_rxm), loopback
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/job.sh" fabric hang 2 2
