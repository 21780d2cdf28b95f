#!/bin/sh
# pslite-vantest on the example van (examples/van_example), built here.
. "${PSL_SRCDIR:-$(dirname "$0")/../..}/tests/vantest/common.sh"
PS_VAN_PATH=$PSL_BUILDDIR/examples/van_example/.libs; export PS_VAN_PATH
run_vantest example --bad-setting PS_EXAMPLE_LINGER_MS=forever --bad-setting PS_CONNECT_TIMEOUT=0
