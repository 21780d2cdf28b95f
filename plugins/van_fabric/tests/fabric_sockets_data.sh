#!/bin/sh
# kvtest over van fabric on the sockets provider: functional only (slow)
FI_PROVIDER=sockets; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/job.sh" fabric data 1 1
