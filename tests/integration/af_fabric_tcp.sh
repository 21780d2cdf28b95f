#!/bin/sh
# libfabric tcp provider
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/af_run.sh" fabric
