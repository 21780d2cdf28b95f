/*
 * Summing kernels: d += s and d = a + b for every BytePS data type.
 *
 * Each loop runs over blocks of a fixed number of elements, so that gcc -O2
 * (whose default cost model does not vectorise a loop that would need a
 * scalar epilogue) turns the inner loop into SIMD; the tail is scalar.
 * Integers wrap around (summed as unsigned, so no overflow is undefined).
 * float16 and bfloat16 are summed through float and rounded back to nearest
 * even (bps_half.h). On x86-64 the same loops are built a second time for
 * AVX2 (and float16 with the F16C conversion instructions) and chosen at run
 * time.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "pslite/server.h"
#include "bps_half.h"
#include "bps_sum.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define PSL_BPS_X86 1
#include <immintrin.h>
#endif

#define BLK 64 /* elements per vectorised block */

/* One loop over n elements of type T: x = EXPR(d[i], s[i]) stored in d[i]. */
#define LOOP2(T, EXPR)                                                                     \
	T *restrict dp = (T *)d;                                                           \
	const T *restrict sp = (const T *)s;                                               \
	size_t i = 0, j;                                                                   \
	for (; i + BLK <= n; i += BLK)                                                     \
		for (j = 0; j < BLK; j++)                                                  \
			dp[i + j] = EXPR(dp[i + j], sp[i + j]);                            \
	for (; i < n; i++)                                                                 \
		dp[i] = EXPR(dp[i], sp[i]);

#define LOOP3(T, EXPR)                                                                     \
	T *restrict dp = (T *)d;                                                           \
	const T *restrict ap = (const T *)a;                                               \
	const T *restrict bp = (const T *)b;                                               \
	size_t i = 0, j;                                                                   \
	for (; i + BLK <= n; i += BLK)                                                     \
		for (j = 0; j < BLK; j++)                                                  \
			dp[i + j] = EXPR(ap[i + j], bp[i + j]);                            \
	for (; i < n; i++)                                                                 \
		dp[i] = EXPR(ap[i], bp[i]);

#define ADD(x, y) ((x) + (y))
#define ADD_F16(x, y) psl__f32_to_f16(psl__f16_to_f32(x) + psl__f16_to_f32(y))
#define ADD_BF16(x, y) psl__f32_to_bf16(psl__bf16_to_f32(x) + psl__bf16_to_f32(y))

/* The kernels of one build (ATTR: target attributes, SFX: name suffix). */
#define KERNELS(ATTR, SFX)                                                                 \
	ATTR static void sum_f32_##SFX(void *restrict d, const void *restrict s, size_t n) \
	{                                                                                  \
		LOOP2(float, ADD)                                                          \
	}                                                                                  \
	ATTR static void sum_f64_##SFX(void *restrict d, const void *restrict s, size_t n) \
	{                                                                                  \
		LOOP2(double, ADD)                                                         \
	}                                                                                  \
	ATTR static void sum_u8_##SFX(void *restrict d, const void *restrict s, size_t n)  \
	{                                                                                  \
		LOOP2(uint8_t, (uint8_t)ADD)                                               \
	}                                                                                  \
	ATTR static void sum_u32_##SFX(void *restrict d, const void *restrict s, size_t n) \
	{                                                                                  \
		LOOP2(uint32_t, ADD)                                                       \
	}                                                                                  \
	ATTR static void sum_u64_##SFX(void *restrict d, const void *restrict s, size_t n) \
	{                                                                                  \
		LOOP2(uint64_t, ADD)                                                       \
	}                                                                                  \
	ATTR static void sum_f16_##SFX(void *restrict d, const void *restrict s, size_t n) \
	{                                                                                  \
		LOOP2(uint16_t, ADD_F16)                                                   \
	}                                                                                  \
	ATTR static void sum_bf16_##SFX(void *restrict d, const void *restrict s,          \
					size_t n)                                          \
	{                                                                                  \
		LOOP2(uint16_t, ADD_BF16)                                                  \
	}                                                                                  \
	ATTR static void sum3_f32_##SFX(void *restrict d, const void *restrict a,          \
					const void *restrict b, size_t n)                  \
	{                                                                                  \
		LOOP3(float, ADD)                                                          \
	}                                                                                  \
	ATTR static void sum3_f64_##SFX(void *restrict d, const void *restrict a,          \
					const void *restrict b, size_t n)                  \
	{                                                                                  \
		LOOP3(double, ADD)                                                         \
	}                                                                                  \
	ATTR static void sum3_u8_##SFX(void *restrict d, const void *restrict a,           \
				       const void *restrict b, size_t n)                   \
	{                                                                                  \
		LOOP3(uint8_t, (uint8_t)ADD)                                               \
	}                                                                                  \
	ATTR static void sum3_u32_##SFX(void *restrict d, const void *restrict a,          \
					const void *restrict b, size_t n)                  \
	{                                                                                  \
		LOOP3(uint32_t, ADD)                                                       \
	}                                                                                  \
	ATTR static void sum3_u64_##SFX(void *restrict d, const void *restrict a,          \
					const void *restrict b, size_t n)                  \
	{                                                                                  \
		LOOP3(uint64_t, ADD)                                                       \
	}                                                                                  \
	ATTR static void sum3_f16_##SFX(void *restrict d, const void *restrict a,          \
					const void *restrict b, size_t n)                  \
	{                                                                                  \
		LOOP3(uint16_t, ADD_F16)                                                   \
	}                                                                                  \
	ATTR static void sum3_bf16_##SFX(void *restrict d, const void *restrict a,         \
					 const void *restrict b, size_t n)                 \
	{                                                                                  \
		LOOP3(uint16_t, ADD_BF16)                                                  \
	}

#define TABLE(NAME, SFX, F16, F16_3)                                                      \
	{                                                                                  \
		.name = NAME,                                                              \
		.sum =                                                                     \
			{                                                                  \
				[PSL_BYTEPS_FLOAT32] = sum_f32_##SFX,                      \
				[PSL_BYTEPS_FLOAT64] = sum_f64_##SFX,                      \
				[PSL_BYTEPS_FLOAT16] = F16,                                \
				[PSL_BYTEPS_UINT8] = sum_u8_##SFX,                         \
				[PSL_BYTEPS_INT32] = sum_u32_##SFX,                        \
				[PSL_BYTEPS_INT8] = sum_u8_##SFX,                          \
				[PSL_BYTEPS_INT64] = sum_u64_##SFX,                        \
				[PSL_BYTEPS_BFLOAT16] = sum_bf16_##SFX,                    \
			},                                                                 \
		.sum3 =                                                                    \
			{                                                                  \
				[PSL_BYTEPS_FLOAT32] = sum3_f32_##SFX,                     \
				[PSL_BYTEPS_FLOAT64] = sum3_f64_##SFX,                     \
				[PSL_BYTEPS_FLOAT16] = F16_3,                              \
				[PSL_BYTEPS_UINT8] = sum3_u8_##SFX,                        \
				[PSL_BYTEPS_INT32] = sum3_u32_##SFX,                       \
				[PSL_BYTEPS_INT8] = sum3_u8_##SFX,                         \
				[PSL_BYTEPS_INT64] = sum3_u64_##SFX,                       \
				[PSL_BYTEPS_BFLOAT16] = sum3_bf16_##SFX,                   \
			},                                                                 \
	}

KERNELS(, generic)

static const struct psl__bps_kernels generic_table =
	TABLE("generic", generic, sum_f16_generic, sum3_f16_generic);

const struct psl__bps_kernels *psl__bps_kernels_generic(void)
{
	return &generic_table;
}

#ifdef PSL_BPS_X86
KERNELS(__attribute__((target("avx2"))), avx2)

/* float16 with F16C: 8 conversions per instruction, same rounding (to
 * nearest even) as the generic code, which does the tail. */
#define F16C_ATTR __attribute__((target("avx2,f16c")))
#define F16C_ROUND (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

F16C_ATTR static void sum_f16_f16c(void *restrict d, const void *restrict s, size_t n)
{
	uint16_t *restrict dp = d;
	const uint16_t *restrict sp = s;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dp + i)));
		__m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sp + i)));
		_mm_storeu_si128((__m128i *)(dp + i),
				 _mm256_cvtps_ph(_mm256_add_ps(x, y), F16C_ROUND));
	}
	for (; i < n; i++)
		dp[i] = ADD_F16(dp[i], sp[i]);
}

F16C_ATTR static void sum3_f16_f16c(void *restrict d, const void *restrict a,
				    const void *restrict b, size_t n)
{
	uint16_t *restrict dp = d;
	const uint16_t *restrict ap = a, *restrict bp = b;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(ap + i)));
		__m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(bp + i)));
		_mm_storeu_si128((__m128i *)(dp + i),
				 _mm256_cvtps_ph(_mm256_add_ps(x, y), F16C_ROUND));
	}
	for (; i < n; i++)
		dp[i] = ADD_F16(ap[i], bp[i]);
}

static const struct psl__bps_kernels avx2_table =
	TABLE("avx2", avx2, sum_f16_avx2, sum3_f16_avx2);
static const struct psl__bps_kernels avx2_f16c_table =
	TABLE("avx2+f16c", avx2, sum_f16_f16c, sum3_f16_f16c);
#endif

static const struct psl__bps_kernels *best;
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

#ifdef PSL_BPS_X86
#include <cpuid.h>
/* (CPUID, not __builtin_cpu_supports("f16c"): clang 14 does not know it) */
static int cpu_has_f16c(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

static void pick_best(void)
{
	best = &generic_table;
#ifdef PSL_BPS_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		best = cpu_has_f16c() ? &avx2_f16c_table : &avx2_table;
#endif
}

const struct psl__bps_kernels *psl__bps_kernels_best(void)
{
	pthread_once(&best_once, pick_best);
	return best;
}

static int check(int dtype, size_t bytes, size_t *n)
{
	size_t esz = psl_byteps_dtype_size(dtype);
	if (!esz || bytes % esz)
		return -EINVAL;
	*n = bytes / esz;
	return 0;
}

int psl__bps_sum(int dtype, void *d, const void *s, size_t bytes)
{
	size_t n;
	int rc = check(dtype, bytes, &n);
	if (rc)
		return rc;
	psl__bps_kernels_best()->sum[dtype](d, s, n);
	return 0;
}

int psl__bps_sum3(int dtype, void *d, const void *a, const void *b, size_t bytes)
{
	size_t n;
	int rc = check(dtype, bytes, &n);
	if (rc)
		return rc;
	psl__bps_kernels_best()->sum3[dtype](d, a, b, n);
	return 0;
}
