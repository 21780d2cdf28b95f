#!/bin/sh
# exit codes after a lost node over van fabric, tcp provider
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/exit_codes.sh" fabric
