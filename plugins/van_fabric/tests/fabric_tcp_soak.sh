#!/bin/sh
# kvtest over van fabric on the tcp provider (ofi_rxm), loopback
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/job.sh" fabric soak 2 2
