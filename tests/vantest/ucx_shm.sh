#!/bin/sh
# pslite-vantest on van_ucx over shared memory. A peer killed in the middle
# of a cross-memory-attach copy aborts its peers inside UCX 1.13
# (docs/van-ucx.md, "Known problem"): peer-killed runs without cma.
. "${PSL_SRCDIR:-$(dirname "$0")/../..}/tests/vantest/common.sh"
UCX_TLS=posix,sysv,cma,self; export UCX_TLS
run_vantest ucx --exclude peer-killed --bad-setting PS_UCX_INLINE=lots || exit $?
UCX_TLS=posix,sysv,self "$vantest" --timeout 120 "$(find_van ucx)" peer-killed
