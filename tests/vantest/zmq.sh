#!/bin/sh
# pslite-vantest on van_zmq.
. "${PSL_SRCDIR:-$(dirname "$0")/../..}/tests/vantest/common.sh"
run_vantest zmq --bad-setting PS_ZMQ_LINGER_MS=forever --bad-setting PS_BUSY_POLL=2
