#!/bin/sh
# exit codes after a lost node over van ucx, UCX restricted to TCP
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/exit_codes.sh" ucx
