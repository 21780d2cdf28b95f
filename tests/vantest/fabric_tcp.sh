#!/bin/sh
# pslite-vantest on van_fabric with libfabric's tcp provider.
. "${PSL_SRCDIR:-$(dirname "$0")/../..}/tests/vantest/common.sh"
FI_PROVIDER=tcp; export FI_PROVIDER
run_vantest fabric --bad-setting PS_FABRIC_INLINE=lots --bad-setting PS_BUSY_POLL=2
