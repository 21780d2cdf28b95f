#!/bin/sh
# kvtest across network namespaces (veth + bridge) over van fabric on the tcp provider: data, a
# server whose link is cut mid-job, and data while 1% of the frames are
# dropped (skips without root or namespaces)
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/netns.sh" fabric data cut lossy
