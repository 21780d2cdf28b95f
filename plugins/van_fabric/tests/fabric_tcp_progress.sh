#!/bin/sh
# pslite-vantest's progress case on van fabric (tcp provider): van fabric has
# progress(), so the case must find answers delivered on the driving thread
# (the case alone passes a van without the entry).
. "${PSL_SRCDIR:-$(dirname "$0")/../../..}/tests/vantest/common.sh"
FI_PROVIDER=tcp; export FI_PROVIDER
run_progress fabric
