#!/bin/sh
# pslite-vantest's progress case on van zmq: van zmq has progress() (the
# waiting caller reads the ROUTER), so the case must find answers delivered
# on the driving thread (the case alone passes a van without the entry).
. "${PSL_SRCDIR:-$(dirname "$0")/../../..}/tests/vantest/common.sh"
run_progress zmq
