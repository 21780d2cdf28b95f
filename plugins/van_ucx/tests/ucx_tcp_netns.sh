#!/bin/sh
# kvtest across network namespaces (veth + bridge) over van ucx, UCX
# restricted to TCP: data, a server whose link is cut mid-job, and data while
# 1% of the frames are dropped (skips without root or namespaces)
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/netns.sh" ucx data cut lossy
