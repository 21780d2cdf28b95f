/* bench/memcpy_ref: memcpy bandwidth between two buffers of SIZE bytes, the
 * reference for IPC's goodput (bench/ipc.sh). Prints one line:
 *   memcpy SIZE bytes: N GB/s (N Gbps)
 * usage: bench/memcpy_ref SIZE [SECONDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 1 << 20;
	double secs = argc > 2 ? atof(argv[2]) : 2.0, t0, t;
	/* a working set past the caches, as a job's buffers are */
	size_t nbuf = size >= (64u << 20) ? 2 : (128u << 20) / size, i = 0, n = 0;
	char **src = calloc(nbuf, sizeof(*src)), **dst = calloc(nbuf, sizeof(*dst));
	if (!size || !src || !dst)
		return 2;
	for (i = 0; i < nbuf; i++) {
		src[i] = malloc(size);
		dst[i] = malloc(size);
		if (!src[i] || !dst[i])
			return 2;
		memset(src[i], (int)i, size);
		memset(dst[i], 0, size);
	}
	t0 = now();
	do {
		for (i = 0; i < nbuf; i++)
			memcpy(dst[i], src[i], size);
		n += nbuf;
		t = now() - t0;
	} while (t < secs);
	printf("memcpy %zu bytes: %.2f GB/s (%.2f Gbps)\n", size, (double)n * (double)size / t / 1e9,
	       8.0 * (double)n * (double)size / t / 1e9);
	{
		volatile char sink = dst[nbuf - 1][size - 1]; /* (the copies are used) */
		(void)sink;
	}
	return 0;
}
