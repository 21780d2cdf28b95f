#!/bin/sh
# kvtest across network namespaces (veth + bridge) over van zmq: data, a
# server whose link is cut mid-job, and data while 1% of the frames are
# dropped, and DMLC_INTERFACE=auto beside an interface that leads nowhere
# (skips without root or namespaces)
[ -n "${PSL_BUILDDIR:-}" ] || { [ -f tests/testenv.sh ] && . ./tests/testenv.sh; } || { echo "$0: run it from the build directory (where tests/testenv.sh is) or by make check TESTS=$0" >&2; exit 99; }
exec "$PSL_SRCDIR/tests/integration/netns.sh" zmq data cut lossy auto
