/*
 * pslite-server: BytePS's summation server on pslite, over any van.
 *
 * Start it where a BytePS job runs `python3 -c 'import byteps.server'`: with
 * DMLC_ROLE=server (or scheduler) and the same DMLC_* and BYTEPS_* variables.
 * See docs/pslite-server.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <pslite.h>
#include <pslite/server.h>

/* The van receives every pushed tensor partition (MBs) into a fresh
 * allocation that the server frees a moment later. glibc gives blocks that
 * large their own mmap (or trims them off its heaps when freed), so each
 * receive faults its pages in again: 13% of the server's CPU in perf at 4 MiB
 * partitions. Keep them in the heap and the heap mapped, unless the user
 * tunes malloc already. */
static void tune_malloc(void)
{
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
	if (getenv("GLIBC_TUNABLES") || getenv("MALLOC_MMAP_THRESHOLD_") ||
	    getenv("MALLOC_TRIM_THRESHOLD_"))
		return;
	mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest */
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

int main(int argc, char **argv)
{
	char why[400];
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
	tune_malloc();
	rc = psl_byteps_server_run(NULL);
	if (rc) {
		fprintf(stderr, "pslite-server: %s\n", psl_strerror(rc));
		return rc == -EINVAL ? 2 : 1;
	}
	/* finalize can succeed without a node the job lost: that is still a
	 * failed job (exit 3, as pslite-bench) */
	rc = psl_job_lost(why, sizeof(why));
	if (rc) {
		fprintf(stderr, "pslite-server: exits with 3: the job lost a node (%s): %s\n",
			psl_strerror(rc), why);
		return 3;
	}
	return 0;
}
