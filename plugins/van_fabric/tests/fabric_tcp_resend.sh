#!/bin/sh
# kvtest scenario resend over van fabric on the tcp provider (ofi_rxm), loopback
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/job.sh" fabric resend 2 2
