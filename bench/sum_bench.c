/*
 * sum_bench: how fast pslite-server's summing loop runs on one core, beside
 * a plain memcpy of the same size.
 *
 *   bench/sum_bench [BYTES] [--reps N] [--all]
 *
 * BYTES defaults to 4 MiB (a BytePS partition of BYTEPS_PARTITION_BYTES is
 * 4096000). Each kernel runs over the same buffers again and again; the
 * median time of N timed batches is reported (the machine may be shared).
 * Two rates per line:
 *   tensor GB/s   BYTES / time: how many bytes of tensor a core sums per second
 *   memory GB/s   bytes read + written / time: memcpy moves 2*BYTES, d += s
 *                 and d = a + b move 3*BYTES
 * and the ratio of each to memcpy's. The float32 d += s line against memcpy
 * is the figure docs/performance.md reports.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bps_sum.h"
#include "pslite/server.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

enum { K_MEMCPY, K_SUM, K_SUM3 };

struct ctx {
	void *a, *b, *c;
	size_t bytes;
};

/* Median seconds per call of kernel kind over reps batches. */
static double time_kernel(struct ctx *x, int kind, const struct psl__bps_kernels *k, int dt,
			  int reps)
{
	double *t = calloc((size_t)reps, sizeof(double)), med;
	size_t n = x->bytes / (psl_byteps_dtype_size(dt) ? psl_byteps_dtype_size(dt) : 1);
	int batch = 1, i, j;

	/* a batch lasts about 20 ms */
	for (;;) {
		double t0 = now_s();
		for (j = 0; j < batch; j++) {
			if (kind == K_MEMCPY)
				memcpy(x->a, x->b, x->bytes);
			else if (kind == K_SUM)
				k->sum[dt](x->a, x->b, n);
			else
				k->sum3[dt](x->c, x->a, x->b, n);
			__asm__ volatile("" : : "r"(x->a), "r"(x->c) : "memory");
		}
		if (now_s() - t0 > 0.02 || batch > (1 << 20))
			break;
		batch *= 2;
	}
	for (i = 0; i < reps; i++) {
		double t0 = now_s();
		for (j = 0; j < batch; j++) {
			if (kind == K_MEMCPY)
				memcpy(x->a, x->b, x->bytes);
			else if (kind == K_SUM)
				k->sum[dt](x->a, x->b, n);
			else
				k->sum3[dt](x->c, x->a, x->b, n);
			__asm__ volatile("" : : "r"(x->a), "r"(x->c) : "memory");
		}
		t[i] = (now_s() - t0) / batch;
	}
	qsort(t, (size_t)reps, sizeof(double), cmp_d);
	med = t[reps / 2];
	free(t);
	return med;
}

static void line(const char *what, size_t bytes, double secs, double traffic, double mc_secs)
{
	double tensor = (double)bytes / secs / 1e9, mem = traffic * (double)bytes / secs / 1e9;
	double mc_tensor = (double)bytes / mc_secs / 1e9, mc_mem = 2.0 * mc_tensor;
	printf("%-28s %8.2f us  tensor %7.2f GB/s (%5.1f%% of memcpy)  memory %7.2f GB/s "
	       "(%5.1f%% of memcpy)\n",
	       what, secs * 1e6, tensor, 100.0 * tensor / mc_tensor, mem, 100.0 * mem / mc_mem);
}

int main(int argc, char **argv)
{
	static const int dts[] = {PSL_BYTEPS_FLOAT32,  PSL_BYTEPS_FLOAT64, PSL_BYTEPS_FLOAT16,
				  PSL_BYTEPS_BFLOAT16, PSL_BYTEPS_INT32,   PSL_BYTEPS_INT64,
				  PSL_BYTEPS_INT8,     PSL_BYTEPS_UINT8};
	const struct psl__bps_kernels *sets[2] = {psl__bps_kernels_generic(),
						  psl__bps_kernels_best()};
	size_t bytes = 4u << 20;
	int reps = 21, i, s, all = 0;
	struct ctx x;
	double mc;
	cpu_set_t cpus;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--all")) {
			all = 1;
		} else {
			char *end;
			errno = 0;
			bytes = strtoul(argv[i], &end, 10);
			if (errno || *end || bytes < 64) {
				fprintf(stderr, "usage: sum_bench [BYTES >= 64] [--reps N] "
						"[--all]\n");
				return 2;
			}
		}
	}
	if (reps < 1)
		reps = 1;
	bytes &= ~(size_t)7;
	/* one core: stay on the one we started on */
	CPU_ZERO(&cpus);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);

	if (posix_memalign(&x.a, 4096, bytes) || posix_memalign(&x.b, 4096, bytes) ||
	    posix_memalign(&x.c, 4096, bytes)) {
		fprintf(stderr, "sum_bench: out of memory\n");
		return 1;
	}
	x.bytes = bytes;
	/* zeros: a valid value of every type, summed as fast as any other
	 * (the loops have no branches on values) */
	memset(x.a, 0, bytes);
	memset(x.b, 0, bytes);
	memset(x.c, 0, bytes);

	printf("sum_bench: %zu bytes, median of %d batches, one core; best kernels: %s\n",
	       bytes, reps, sets[1]->name);
	mc = time_kernel(&x, K_MEMCPY, NULL, 0, reps);
	line("memcpy", bytes, mc, 2.0, mc);
	for (s = 1; s >= 0; s--) {
		for (i = 0; i < (int)(sizeof(dts) / sizeof(dts[0])); i++) {
			char what[64];
			if (!all && dts[i] != PSL_BYTEPS_FLOAT32)
				continue;
			snprintf(what, sizeof(what), "%s d+=s (%s)", psl_byteps_dtype_name(dts[i]),
				 sets[s]->name);
			line(what, bytes, time_kernel(&x, K_SUM, sets[s], dts[i], reps), 3.0, mc);
			snprintf(what, sizeof(what), "%s d=a+b (%s)", psl_byteps_dtype_name(dts[i]),
				 sets[s]->name);
			line(what, bytes, time_kernel(&x, K_SUM3, sets[s], dts[i], reps), 3.0, mc);
		}
		if (sets[0] == sets[1])
			break;
	}
	free(x.a);
	free(x.b);
	free(x.c);
	return 0;
}
