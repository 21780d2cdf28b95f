#!/bin/sh
# pslite-vantest's progress case on the example van: it has progress(), so
# the case must find answers delivered on the thread that drives.
. "${PSL_SRCDIR:-$(dirname "$0")/../..}/tests/vantest/common.sh"
PS_VAN_PATH=$PSL_BUILDDIR/examples/van_example/.libs; export PS_VAN_PATH
run_progress example
