#!/bin/sh
# kvtest across network namespaces (veth + bridge) over van zmq: data, and
# a server whose link is cut mid-job (skips without root or namespaces)
exec "$PSL_SRCDIR/tests/integration/netns.sh" zmq data cut
