#!/bin/sh
# pslite-vantest on van_ucx over tcp.
. "${PSL_SRCDIR:-$(dirname "$0")/../..}/tests/vantest/common.sh"
UCX_TLS=tcp; export UCX_TLS
run_vantest ucx --bad-setting PS_UCX_INLINE=lots --bad-setting PS_BUSY_POLL=2
