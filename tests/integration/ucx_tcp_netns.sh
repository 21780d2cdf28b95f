#!/bin/sh
# kvtest across network namespaces (veth + bridge) over van ucx, UCX
# restricted to TCP: data, and a server whose link is cut mid-job
UCX_TLS=tcp; export UCX_TLS
exec "$PSL_SRCDIR/tests/integration/netns.sh" ucx data cut
