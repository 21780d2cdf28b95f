/* The summing kernels of pslite-server. */
#ifndef PSL_SERVER_BPS_SUM_H
#define PSL_SERVER_BPS_SUM_H

#include <stddef.h>

/* BytePS data type numbers run 0..10 (see pslite/server.h). */
#define PSL__BPS_NDTYPE 11

/* d[i] += s[i] for n elements; d and s do not overlap. */
typedef void (*psl__bps_sum_fn)(void *restrict d, const void *restrict s, size_t n);
/* d[i] = a[i] + b[i] for n elements; d overlaps neither a nor b. */
typedef void (*psl__bps_sum3_fn)(void *restrict d, const void *restrict a,
				 const void *restrict b, size_t n);

struct psl__bps_kernels {
	const char *name; /* "generic", "avx2", "avx2+f16c" */
	psl__bps_sum_fn sum[PSL__BPS_NDTYPE];	/* NULL: type not summed */
	psl__bps_sum3_fn sum3[PSL__BPS_NDTYPE];
};

/* Plain C loops, vectorised for the build's baseline ISA. */
const struct psl__bps_kernels *psl__bps_kernels_generic(void);
/* The best set this CPU runs (x86-64: the AVX2 and F16C builds of the same
 * loops where the CPU has them), chosen once. */
const struct psl__bps_kernels *psl__bps_kernels_best(void);

/* With the best kernels, on byte counts: -EINVAL for a type that is not
 * summed or a length that is not a multiple of the element size. */
int psl__bps_sum(int dtype, void *d, const void *s, size_t bytes);
int psl__bps_sum3(int dtype, void *d, const void *a, const void *b, size_t bytes);

#endif
