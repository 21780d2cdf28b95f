#!/bin/sh
# kvtest across network namespaces (veth + bridge) over van zmq: data, a
# server whose link is cut mid-job, and data while 1% of the frames are
# dropped (skips without root or namespaces)
exec "$PSL_SRCDIR/tests/integration/netns.sh" zmq data cut lossy
