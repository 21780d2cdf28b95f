/*
 * sum_bench: how fast pslite-server's summing loop runs on one core, beside
 * a plain memcpy of the same size.
 *
 *   bench/sum_bench [BYTES] [--reps N] [--all]
 *
 * BYTES defaults to 4 MiB (a BytePS partition of BYTEPS_PARTITION_BYTES is
 * 4096000). Each case runs over the same buffers again and again, in
 * batches of about 10 ms; N reps (21) of every case, medians reported.
 * Two rates per line:
 *   tensor GB/s   BYTES / time: how many bytes of tensor a core sums per second
 *   memory GB/s   bytes read + written / time: memcpy moves 2*BYTES, d += s
 *                 and d = a + b move 3*BYTES
 * and "vs memcpy": the tensor rate against memcpy's, taken in pairs (a memcpy
 * batch right before each batch of the case) so that a machine shared with
 * others shifts both alike; the median of those ratios. (Against memory
 * traffic the ratio is 1.5 times that.) The float32 d += s line is the figure
 * docs/performance.md reports.
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

/* One thing to time: memcpy, or a kernel of a set on a data type. */
struct kcase {
	char what[64];
	int kind;
	const struct psl__bps_kernels *k;
	int dt;
	int batch;   /* calls per timed batch */
	double *t;   /* seconds per call, one per rep */
	double *rel; /* memcpy's time / this one's, in the same rep */
};

static double run_batch(struct ctx *x, const struct kcase *c, int batch)
{
	size_t n = x->bytes / (psl_byteps_dtype_size(c->dt) ? psl_byteps_dtype_size(c->dt) : 1);
	double t0 = now_s();
	int j;
	for (j = 0; j < batch; j++) {
		if (c->kind == K_MEMCPY)
			memcpy(x->a, x->b, x->bytes);
		else if (c->kind == K_SUM)
			c->k->sum[c->dt](x->a, x->b, n);
		else
			c->k->sum3[c->dt](x->c, x->a, x->b, n);
		__asm__ volatile("" : : "r"(x->a), "r"(x->c) : "memory");
	}
	return (now_s() - t0) / batch;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	static const int dts[] = {PSL_BYTEPS_FLOAT32,  PSL_BYTEPS_FLOAT64, PSL_BYTEPS_FLOAT16,
				  PSL_BYTEPS_BFLOAT16, PSL_BYTEPS_INT32,   PSL_BYTEPS_INT64,
				  PSL_BYTEPS_INT8,     PSL_BYTEPS_UINT8};
	const struct psl__bps_kernels *sets[2] = {psl__bps_kernels_best(),
						  psl__bps_kernels_generic()};
	size_t bytes = 4u << 20;
	int reps = 21, i, s, d, r, all = 0, nc = 0;
	struct kcase cases[1 + 2 * 2 * 8], *c;
	struct ctx x;
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

	memset(cases, 0, sizeof(cases));
	snprintf(cases[nc].what, sizeof(cases[nc].what), "memcpy");
	cases[nc++].kind = K_MEMCPY;
	for (s = 0; s < 2; s++) {
		if (s == 1 && sets[1] == sets[0])
			break;
		for (d = 0; d < (int)(sizeof(dts) / sizeof(dts[0])); d++) {
			if (!all && dts[d] != PSL_BYTEPS_FLOAT32)
				continue;
			for (i = K_SUM; i <= K_SUM3; i++) {
				c = &cases[nc++];
				snprintf(c->what, sizeof(c->what), "%s %s (%s)",
					 psl_byteps_dtype_name(dts[d]),
					 i == K_SUM ? "d+=s" : "d=a+b", sets[s]->name);
				c->kind = i;
				c->k = sets[s];
				c->dt = dts[d];
			}
		}
	}
	/* batches of about 10 ms, so that a rep of every case is short and
	 * memcpy runs close in time to each case it is compared with */
	for (i = 0; i < nc; i++) {
		c = &cases[i];
		c->t = calloc((size_t)reps, sizeof(double));
		c->rel = calloc((size_t)reps, sizeof(double));
		if (!c->t || !c->rel)
			return 1;
		for (c->batch = 1; c->batch < (1 << 20); c->batch *= 2)
			if (run_batch(&x, c, c->batch) * c->batch > 0.01)
				break;
	}
	for (r = 0; r < reps; r++) {
		for (i = 1; i < nc; i++) {
			double mc = run_batch(&x, &cases[0], cases[0].batch);
			cases[i].t[r] = run_batch(&x, &cases[i], cases[i].batch);
			cases[i].rel[r] = mc / cases[i].t[r];
			if (i == 1)
				cases[0].t[r] = mc;
		}
		if (nc == 1)
			cases[0].t[r] = run_batch(&x, &cases[0], cases[0].batch);
	}

	printf("sum_bench: %zu bytes, one core, %d reps, each case timed right after a "
	       "memcpy; medians. best kernels: %s\n",
	       bytes, reps, sets[0]->name);
	printf("%-28s %10s %16s %16s %14s\n", "", "time", "tensor GB/s", "memory GB/s",
	       "vs memcpy");
	for (i = 0; i < nc; i++) {
		double t, rel, traffic = cases[i].kind == K_MEMCPY ? 2.0 : 3.0;
		c = &cases[i];
		t = median(c->t, reps);
		rel = i ? median(c->rel, reps) : 1.0;
		/* vs memcpy: tensor bytes per second (memory traffic: x 1.5) */
		printf("%-28s %8.1f us %16.2f %16.2f %13.1f%%\n", c->what, t * 1e6,
		       (double)bytes / t / 1e9, traffic * (double)bytes / t / 1e9, 100.0 * rel);
		free(c->t);
		free(c->rel);
	}
	free(x.a);
	free(x.b);
	free(x.c);
	return 0;
}
