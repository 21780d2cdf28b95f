/*
 * pslite-server: BytePS's summation server on pslite, over any van.
 *
 * Start it where a BytePS job runs `python3 -c 'import byteps.server'`: with
 * DMLC_ROLE=server (or scheduler) and the same DMLC_* and BYTEPS_* variables.
 * See docs/pslite-server.md.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pslite.h>
#include <pslite/server.h>

int main(int argc, char **argv)
{
	int rc;

	if (argc > 1) {
		int help = !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help");
		fprintf(help ? stdout : stderr,
			"usage: pslite-server\n"
			"BytePS's summation server (and scheduler), configured by the environment:\n"
			"  DMLC_ROLE=server|scheduler, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT,\n"
			"  DMLC_NUM_WORKER, DMLC_NUM_SERVER, DMLC_ENABLE_RDMA (the van), ...\n"
			"  BYTEPS_SERVER_ENGINE_THREAD (4), BYTEPS_SERVER_ENGINE_BLOCKING (0),\n"
			"  BYTEPS_SERVER_ENABLE_SCHEDULE (0), BYTEPS_ENABLE_ASYNC (0), PS_KEY_LOG (0)\n");
		return help ? 0 : 2;
	}
	rc = psl_byteps_server_run(NULL);
	if (rc) {
		fprintf(stderr, "pslite-server: %s\n", psl_strerror(rc));
		return rc == -EINVAL ? 2 : 1;
	}
	return 0;
}
