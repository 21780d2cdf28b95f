/*
 * bench/cuda_copy_ref: the host-device copy bandwidth that GPU buffers in
 * pslite are measured against (tests/gpu/gpu_bench.sh): cudaMemcpyAsync
 * between a pinned host buffer of pslite's staging pool and device memory,
 * on pslite's own stream (psl__cuda_copy), each direction for about half a
 * second per size.
 *
 *   cuda_copy_ref [--gpu N] [BYTES...]     (default 65536 1048576 8388608)
 *
 * Prints "h2d BYTES GB/s", "d2h BYTES GB/s" and "rt BYTES US" lines (rt:
 * the median of one host-to-device plus one device-to-host copy, each
 * synchronised: the round trip a GPU end adds to a request); exits 77 with
 * one line when there is no CUDA runtime or GPU (PS_CUDA_LIB chooses the
 * runtime).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda.h"
#include "pslite.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* GB/s of copies of len bytes in one direction, for about 0.5 s. */
static double rate(void *host, void *dev, int gpu, size_t len, bool h2d, int *err)
{
	double t0 = now_s(), t;
	long n = 0;
	do {
		*err = h2d ? psl__cuda_copy(dev, PSL_MEM_CUDA, gpu, host, PSL_MEM_HOST, -1, len)
			   : psl__cuda_copy(host, PSL_MEM_HOST, -1, dev, PSL_MEM_CUDA, gpu, len);
		if (*err)
			return 0;
		n++;
		t = now_s() - t0;
	} while (t < 0.5);
	return (double)len * (double)n / t / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median microseconds of a round trip (len bytes there and back), over
 * about 0.3 s. */
static double round_trip_us(void *host, void *dev, int gpu, size_t len, int *err)
{
	static double us[100000];
	double t0 = now_s(), t1;
	size_t n = 0;
	do {
		t1 = now_s();
		*err = psl__cuda_copy(dev, PSL_MEM_CUDA, gpu, host, PSL_MEM_HOST, -1, len);
		if (!*err)
			*err = psl__cuda_copy(host, PSL_MEM_HOST, -1, dev, PSL_MEM_CUDA, gpu, len);
		if (*err)
			return 0;
		us[n++] = (now_s() - t1) * 1e6;
	} while (now_s() - t0 < 0.3 && n < sizeof(us) / sizeof(us[0]));
	qsort(us, n, sizeof(us[0]), cmp_double);
	return us[n / 2];
}

int main(int argc, char **argv)
{
	static const size_t def[] = {65536, 1048576, 8388608};
	size_t sizes[32], nsizes = 0, i;
	char line[1024];
	int gpu = 0, a, rc;

	for (a = 1; a < argc; a++) {
		char *end;
		unsigned long long v;
		if (!strcmp(argv[a], "--gpu") && a + 1 < argc) {
			gpu = atoi(argv[++a]);
			continue;
		}
		v = strtoull(argv[a], &end, 10);
		if (*end || !v || nsizes == 32) {
			fprintf(stderr, "usage: cuda_copy_ref [--gpu N] [BYTES...] (at most 32 sizes)\n");
			return 2;
		}
		sizes[nsizes++] = (size_t)v;
	}
	for (i = 0; !nsizes && i < 3; i++)
		sizes[i] = def[i];
	if (!nsizes)
		nsizes = 3;
	rc = psl_cuda_describe(line, sizeof(line));
	if (rc <= 0) {
		printf("cuda_copy_ref: SKIP: no GPU: %s\n", line);
		return 77;
	}
	printf("cuda: %s\n", line);
	for (i = 0; i < nsizes; i++) {
		void *host, *dev;
		int err = 0;
		double h2d, d2h, rt;
		host = psl__cuda_stage_get(sizes[i], gpu, &err);
		if (!host || (err = psl_mem_alloc(PSL_MEM_CUDA, gpu, sizes[i], &dev))) {
			fprintf(stderr, "cuda_copy_ref: %zu bytes: %s\n", sizes[i], psl_strerror(err));
			return 1;
		}
		memset(host, 0x5a, sizes[i]);
		h2d = rate(host, dev, gpu, sizes[i], true, &err);
		d2h = err ? 0 : rate(host, dev, gpu, sizes[i], false, &err);
		rt = err ? 0 : round_trip_us(host, dev, gpu, sizes[i], &err);
		psl_mem_free(PSL_MEM_CUDA, gpu, dev);
		psl__cuda_stage_put(host);
		if (err) {
			fprintf(stderr, "cuda_copy_ref: %zu bytes: %s\n", sizes[i], psl_strerror(err));
			return 1;
		}
		printf("h2d %zu %.3f\nd2h %zu %.3f\nrt %zu %.2f\n", sizes[i], h2d, sizes[i], d2h,
		       sizes[i], rt);
	}
	return 0;
}
