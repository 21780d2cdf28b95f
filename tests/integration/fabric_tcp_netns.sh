#!/bin/sh
# kvtest across network namespaces (veth + bridge) over van fabric on the tcp
# provider: data, and a server whose link is cut mid-job
FI_PROVIDER=tcp; export FI_PROVIDER
exec "$PSL_SRCDIR/tests/integration/netns.sh" fabric data cut
