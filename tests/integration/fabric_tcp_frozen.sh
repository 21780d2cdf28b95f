#!/bin/sh
# a frozen server over van fabric (tcp provider), 4 MiB values
FI_PROVIDER=tcp; export FI_PROVIDER
FROZEN_BYTES=4194304; export FROZEN_BYTES
exec "$PSL_SRCDIR/tests/integration/frozen.sh" fabric
