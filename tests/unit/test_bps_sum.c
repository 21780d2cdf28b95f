/*
 * pslite-server's summing kernels and half conversions, against references
 * written another way (in double, with rint): every data type, odd lengths,
 * unaligned starts and tails, round to nearest even, NaN and infinities,
 * for the generic kernels and for the ones this CPU picks.
 */
#include <errno.h>
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bps_half.h"
#include "bps_sum.h"
#include "pslite/server.h"

static const int all_dtypes[] = {PSL_BYTEPS_FLOAT32, PSL_BYTEPS_FLOAT64,  PSL_BYTEPS_FLOAT16,
				 PSL_BYTEPS_UINT8,   PSL_BYTEPS_INT32,	  PSL_BYTEPS_INT8,
				 PSL_BYTEPS_INT64,   PSL_BYTEPS_BFLOAT16};
#define NDT (sizeof(all_dtypes) / sizeof(all_dtypes[0]))

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* ------------------------------------------------ reference conversions -- */

/* Rounds |x| (finite, >= 0) to a binary format with `mant` stored mantissa
 * bits, exponent bias `bias` and largest exponent `emax`; returns the bits
 * without sign. Uses rint, so the rounding is the FPU's (to nearest even). */
static uint32_t ref_round(double x, int mant, int bias, int emax)
{
	int e;
	double m;
	uint32_t inf = (uint32_t)(2 * bias + 1) << mant;
	if (x == 0)
		return 0;
	frexp(x, &e);
	e -= 1; /* x = 1.f * 2^e */
	if (e < 1 - bias) /* subnormal */
		return (uint32_t)rint(ldexp(x, bias - 1 + mant));
	m = rint(ldexp(x, mant - e));
	if (m == ldexp(1.0, mant + 1)) {
		m = ldexp(1.0, mant);
		e++;
	}
	if (e > emax)
		return inf;
	return ((uint32_t)(e + bias) << mant) | ((uint32_t)m - (1u << mant));
}

static uint16_t ref_to_f16(double x)
{
	uint16_t s = signbit(x) ? 0x8000 : 0;
	if (isnan(x))
		return 0x7e00 | s;
	if (isinf(x))
		return 0x7c00 | s;
	return (uint16_t)(ref_round(fabs(x), 10, 15, 15) | s);
}

static uint16_t ref_to_bf16(double x)
{
	uint16_t s = signbit(x) ? 0x8000 : 0;
	if (isnan(x))
		return 0x7fc0 | s;
	if (isinf(x))
		return 0x7f80 | s;
	return (uint16_t)(ref_round(fabs(x), 7, 127, 127) | s);
}

static double ref_from_f16(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;
	if (e == 31)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, -24);
	else
		v = ldexp(m + 1024, e - 25);
	return (h & 0x8000) ? -v : v;
}

static double ref_from_bf16(uint16_t h)
{
	int e = (h >> 7) & 0xff, m = h & 0x7f;
	double v;
	if (e == 255)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, -133);
	else
		v = ldexp(m + 128, e - 134);
	return (h & 0x8000) ? -v : v;
}

static bool is_nan16(uint16_t h, bool bf)
{
	return bf ? (h & 0x7fff) > 0x7f80 : (h & 0x7fff) > 0x7c00;
}

/* The correctly rounded half sum of a and b (exact in double for these). */
static uint16_t ref_add16(uint16_t a, uint16_t b, bool bf)
{
	double x = bf ? ref_from_bf16(a) + ref_from_bf16(b) : ref_from_f16(a) + ref_from_f16(b);
	return bf ? ref_to_bf16(x) : ref_to_f16(x);
}

/* ------------------------------------------------------- conversions -- */

static void test_f16_decode_all(void **state)
{
	uint32_t h;
	(void)state;
	for (h = 0; h < 65536; h++) {
		double want = ref_from_f16((uint16_t)h);
		float got = psl__f16_to_f32((uint16_t)h);
		if (isnan(want))
			assert_true(isnan(got));
		else
			assert_true((double)got == want && !signbit(got) == !signbit(want));
	}
}

static void test_f16_encode(void **state)
{
	uint32_t h, i;
	(void)state;
	/* every half survives the round trip */
	for (h = 0; h < 65536; h++) {
		uint16_t back = psl__f32_to_f16(psl__f16_to_f32((uint16_t)h));
		if (is_nan16((uint16_t)h, false))
			assert_true(is_nan16(back, false));
		else
			assert_int_equal(back, h);
	}
	/* halfway cases and their neighbours, between every pair of finite
	 * halves (65504..infinity is checked below) */
	for (h = 0; h < 0x7bff; h++) {
		double lo = ref_from_f16((uint16_t)h), hi = ref_from_f16((uint16_t)(h + 1));
		double mid = (lo + hi) / 2; /* exact in double, and in float */
		float f = (float)mid;
		uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h; /* to even */
		if ((double)f != mid)
			continue; /* not a float (cannot happen for halves) */
		assert_int_equal(psl__f32_to_f16(f), want);
		assert_int_equal(psl__f32_to_f16(nextafterf(f, 0)), h);
		assert_int_equal(psl__f32_to_f16(nextafterf(f, INFINITY)), h + 1);
		assert_int_equal(psl__f32_to_f16(-f), want | 0x8000);
	}
	/* random floats over the whole range */
	for (i = 0; i < 1000000; i++) {
		uint32_t u = (uint32_t)next();
		float f;
		memcpy(&f, &u, 4);
		if (isnan(f))
			assert_true(is_nan16(psl__f32_to_f16(f), false));
		else
			assert_int_equal(psl__f32_to_f16(f), ref_to_f16(f));
	}
	assert_int_equal(psl__f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(psl__f32_to_f16(65519.996f), 0x7bff);
	assert_int_equal(psl__f32_to_f16(65520.0f), 0x7c00); /* tie, to even: infinity */
	assert_int_equal(psl__f32_to_f16(1e10f), 0x7c00);
	assert_int_equal(psl__f32_to_f16(-INFINITY), 0xfc00);
	assert_int_equal(psl__f32_to_f16(0x1p-25f), 0x0000); /* tie with 0: even */
	assert_int_equal(psl__f32_to_f16(0x1.8p-25f), 0x0001);
	assert_int_equal(psl__f32_to_f16(0x1p-24f), 0x0001);
	assert_int_equal(psl__f32_to_f16(-0.0f), 0x8000);
}

static void test_bf16_convert(void **state)
{
	uint32_t h, i;
	(void)state;
	for (h = 0; h < 65536; h++) {
		double want = ref_from_bf16((uint16_t)h);
		float got = psl__bf16_to_f32((uint16_t)h);
		uint16_t back = psl__f32_to_bf16(got);
		if (isnan(want)) {
			assert_true(isnan(got));
			assert_true(is_nan16(back, true));
		} else {
			assert_true((double)got == want && !signbit(got) == !signbit(want));
			assert_int_equal(back, h);
		}
	}
	for (i = 0; i < 1000000; i++) {
		uint32_t u = (uint32_t)next();
		float f;
		memcpy(&f, &u, 4);
		if (isnan(f))
			assert_true(is_nan16(psl__f32_to_bf16(f), true));
		else
			assert_int_equal(psl__f32_to_bf16(f), ref_to_bf16(f));
	}
	assert_int_equal(psl__f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);	     /* tie: even */
	assert_int_equal(psl__f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82); /* tie: up */
	assert_int_equal(psl__f32_to_bf16(3.3895314e38f), 0x7f7f);
	assert_int_equal(psl__f32_to_bf16(FLT_MAX), 0x7f80); /* rounds past the largest */
}

/* --------------------------------------------------------- the kernels -- */

static const struct psl__bps_kernels *sets[2];

static int setup_sets(void **state)
{
	(void)state;
	sets[0] = psl__bps_kernels_generic();
	sets[1] = psl__bps_kernels_best();
	return 0;
}

/* Random element i of a test vector of dt: halves are any bit pattern that is
 * not NaN (NaN is tested on its own), with exponents close enough that the
 * double reference is exact; floats have all mantissa bits set at random. */
static void random_elem(int dt, void *p)
{
	uint64_t r = next();
	switch (dt) {
	case PSL_BYTEPS_FLOAT32: {
		float f = (float)ldexp((double)(r >> 40) / 16777216.0, (int)(r % 40) - 20);
		if (r & 1)
			f = -f;
		memcpy(p, &f, 4);
		break;
	}
	case PSL_BYTEPS_FLOAT64: {
		double d = ldexp((double)(r >> 11) * 0x1p-53, (int)(r % 80) - 40);
		if (r & 1)
			d = -d;
		memcpy(p, &d, 8);
		break;
	}
	case PSL_BYTEPS_FLOAT16: {
		uint16_t h = (uint16_t)(r & 0xffff);
		if ((h & 0x7c00) == 0x7c00)
			h &= 0xbfff; /* no Inf/NaN here */
		memcpy(p, &h, 2);
		break;
	}
	case PSL_BYTEPS_BFLOAT16: {
		/* exponents within 2^-40 .. 2^40, plus some subnormals */
		uint16_t h = (uint16_t)((r & 0x807f) | ((uint16_t)(127 - 40 + (r >> 20) % 81) << 7));
		if ((r >> 40) % 16 == 0)
			h &= 0x807f; /* subnormal */
		memcpy(p, &h, 2);
		break;
	}
	default:
		memcpy(p, &r, psl_byteps_dtype_size(dt));
	}
}

/* The expected a + b for one element of dt, into out. */
static void ref_add(int dt, const void *a, const void *b, void *out)
{
	switch (dt) {
	case PSL_BYTEPS_FLOAT32: {
		float x, y, z;
		memcpy(&x, a, 4);
		memcpy(&y, b, 4);
		z = x + y;
		memcpy(out, &z, 4);
		break;
	}
	case PSL_BYTEPS_FLOAT64: {
		double x, y, z;
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		z = x + y;
		memcpy(out, &z, 8);
		break;
	}
	case PSL_BYTEPS_FLOAT16:
	case PSL_BYTEPS_BFLOAT16: {
		uint16_t x, y, z;
		memcpy(&x, a, 2);
		memcpy(&y, b, 2);
		z = ref_add16(x, y, dt == PSL_BYTEPS_BFLOAT16);
		memcpy(out, &z, 2);
		break;
	}
	case PSL_BYTEPS_UINT8:
	case PSL_BYTEPS_INT8: {
		uint8_t x, y, z;
		memcpy(&x, a, 1);
		memcpy(&y, b, 1);
		z = (uint8_t)(x + y); /* wraps */
		memcpy(out, &z, 1);
		break;
	}
	case PSL_BYTEPS_INT32: {
		uint32_t x, y, z;
		memcpy(&x, a, 4);
		memcpy(&y, b, 4);
		z = x + y;
		memcpy(out, &z, 4);
		break;
	}
	default: {
		uint64_t x, y, z;
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		z = x + y;
		memcpy(out, &z, 8);
	}
	}
}

/* Runs both kernels of set on n elements starting `skew` elements into the
 * buffers (so vector loads are unaligned), checks every element and that
 * nothing around the range was touched. */
static void check_kernels(const struct psl__bps_kernels *set, int dt, size_t n, size_t skew)
{
	size_t esz = psl_byteps_dtype_size(dt), tot = (n + skew + 8) * esz, i;
	unsigned char *a = malloc(tot), *b = malloc(tot), *d = malloc(tot), *want = malloc(esz);
	unsigned char *a0 = malloc(tot);

	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(d);
	for (i = 0; i < tot / esz; i++) {
		random_elem(dt, a + i * esz);
		random_elem(dt, b + i * esz);
	}
	memcpy(a0, a, tot);
	memset(d, 0xa5, tot);

	/* d = a + b */
	set->sum3[dt](d + skew * esz, a + skew * esz, b + skew * esz, n);
	for (i = 0; i < n; i++) {
		ref_add(dt, a + (skew + i) * esz, b + (skew + i) * esz, want);
		if (memcmp(d + (skew + i) * esz, want, esz))
			fail_msg("%s d=a+b (%s), n=%zu skew=%zu: element %zu differs",
				 psl_byteps_dtype_name(dt), set->name, n, skew, i);
	}
	for (i = 0; i < skew * esz; i++)
		assert_int_equal(d[i], 0xa5);
	for (i = (skew + n) * esz; i < tot; i++)
		assert_int_equal(d[i], 0xa5);

	/* a += b gives the same */
	set->sum[dt](a + skew * esz, b + skew * esz, n);
	assert_memory_equal(a + skew * esz, d + skew * esz, n * esz);
	assert_memory_equal(a, a0, skew * esz);
	assert_memory_equal(a + (skew + n) * esz, a0 + (skew + n) * esz, tot - (skew + n) * esz);

	free(a);
	free(a0);
	free(b);
	free(d);
	free(want);
}

static void test_all_types_lengths(void **state)
{
	static const size_t lens[] = {0, 1, 2, 3, 7, 8, 15, 31, 63, 64, 65, 127, 128, 129, 1000, 4099};
	size_t s, t, l, skew;
	(void)state;
	for (s = 0; s < 2; s++)
		for (t = 0; t < NDT; t++)
			for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
				for (skew = 0; skew < 3; skew++)
					check_kernels(sets[s], all_dtypes[t], lens[l], skew);
}

/* Every pair of halves from a grid over the whole range, through the kernel. */
static void half_pairs(const struct psl__bps_kernels *set, bool bf)
{
	int dt = bf ? PSL_BYTEPS_BFLOAT16 : PSL_BYTEPS_FLOAT16;
	enum { N = 4096 };
	uint16_t *a = malloc(N * sizeof(uint16_t)), *b = malloc(N * sizeof(uint16_t));
	uint16_t *d = malloc(N * sizeof(uint16_t));
	uint32_t x, y;
	size_t i;

	for (x = 0; x < 65536; x += 97) {
		for (y = 0, i = 0; y < 65536; y += 61) {
			a[i] = (uint16_t)x;
			b[i] = (uint16_t)y;
			if (++i == N || y + 61 >= 65536) {
				set->sum3[dt](d, a, b, i);
				while (i--) {
					uint16_t w = ref_add16(a[i], b[i], bf);
					if (is_nan16(w, bf)) {
						if (!is_nan16(d[i], bf))
							fail_msg("%s %04x + %04x: %04x, not NaN",
								 set->name, a[i], b[i], d[i]);
					} else if (d[i] != w) {
						fail_msg("%s %s %04x + %04x: got %04x, expected %04x",
							 psl_byteps_dtype_name(dt), set->name, a[i],
							 b[i], d[i], w);
					}
				}
				i = 0;
			}
		}
	}
	free(a);
	free(b);
	free(d);
}

static void test_half_pairs(void **state)
{
	(void)state;
	half_pairs(sets[0], false);
	half_pairs(sets[1], false);
	half_pairs(sets[0], true);
	half_pairs(sets[1], true);
}

/* The cases a reader checks by eye: ties, overflow, NaN and infinities. */
static void test_half_specials(void **state)
{
	static const struct {
		uint16_t a, b, want;
	} f16[] = {
		{0x3c00, 0x1000, 0x3c00}, /* 1 + 2^-11: tie, stays at even 1.0 */
		{0x3c01, 0x1000, 0x3c02}, /* 1+2^-10 + 2^-11: tie, up to even */
		{0x3c00, 0x1001, 0x3c01}, /* just above the tie: up */
		{0x7bff, 0x4c00, 0x7c00}, /* 65504 + 16 = 65520: tie, to infinity */
		{0x7bff, 0x4bff, 0x7bff}, /* 65504 + 15.99: stays */
		{0x0001, 0x0001, 0x0002}, /* subnormals add exactly */
		{0x03ff, 0x0001, 0x0400}, /* into the normals */
		{0x7c00, 0x3c00, 0x7c00}, /* inf + 1 */
		{0xfc00, 0x7bff, 0xfc00}, /* -inf + max */
		{0x8000, 0x8000, 0x8000}, /* -0 + -0 = -0 */
		{0x0000, 0x8000, 0x0000}, /* 0 + -0 = +0 */
		{0x3c00, 0xbc00, 0x0000}, /* 1 - 1 = +0 */
	};
	static const struct {
		uint16_t a, b;
	} f16nan[] = {{0x7c00, 0xfc00}, {0x7e00, 0x3c00}, {0x3c00, 0x7c01}, {0xfe00, 0xfe00}};
	static const struct {
		uint16_t a, b, want;
	} bf16[] = {
		{0x3f80, 0x3b80, 0x3f80}, /* 1 + 2^-8: tie, even */
		{0x3f81, 0x3b80, 0x3f82}, /* tie, up to even */
		{0x7f7f, 0x7f7f, 0x7f80}, /* max + max: infinity */
		{0x0001, 0x0001, 0x0002}, /* subnormals */
		{0x7f80, 0xff80, 0x7fc0}, /* inf - inf: NaN (checked as NaN) */
	};
	size_t s, i;
	(void)state;
	for (s = 0; s < 2; s++) {
		for (i = 0; i < sizeof(f16) / sizeof(f16[0]); i++) {
			uint16_t d;
			sets[s]->sum3[PSL_BYTEPS_FLOAT16](&d, &f16[i].a, &f16[i].b, 1);
			assert_int_equal(d, f16[i].want);
			d = f16[i].a;
			sets[s]->sum[PSL_BYTEPS_FLOAT16](&d, &f16[i].b, 1);
			assert_int_equal(d, f16[i].want);
		}
		for (i = 0; i < sizeof(f16nan) / sizeof(f16nan[0]); i++) {
			uint16_t d;
			sets[s]->sum3[PSL_BYTEPS_FLOAT16](&d, &f16nan[i].a, &f16nan[i].b, 1);
			assert_true(is_nan16(d, false));
		}
		for (i = 0; i < sizeof(bf16) / sizeof(bf16[0]); i++) {
			uint16_t d;
			sets[s]->sum3[PSL_BYTEPS_BFLOAT16](&d, &bf16[i].a, &bf16[i].b, 1);
			if (is_nan16(bf16[i].want, true))
				assert_true(is_nan16(d, true));
			else
				assert_int_equal(d, bf16[i].want);
		}
	}
}

/* The vectorised part of the F16C kernel and its scalar tail agree: a vector
 * of specials, 8 wide and 9 wide. */
static void test_half_vector_and_tail(void **state)
{
	uint16_t a[17], b[17], d[17];
	size_t i, s;
	(void)state;
	for (i = 0; i < 17; i++) {
		a[i] = (uint16_t)(i % 2 ? 0x3c01 : 0x7bff);
		b[i] = (uint16_t)(i % 2 ? 0x1000 : 0x4c00);
	}
	for (s = 0; s < 2; s++) {
		sets[s]->sum3[PSL_BYTEPS_FLOAT16](d, a, b, 17);
		for (i = 0; i < 17; i++)
			assert_int_equal(d[i], i % 2 ? 0x3c02 : 0x7c00);
	}
}

static void test_byte_api(void **state)
{
	float d[3] = {1, 2, 3}, s[3] = {0.5f, 0.25f, -3};
	(void)state;
	assert_int_equal(psl__bps_sum(PSL_BYTEPS_FLOAT32, d, s, sizeof(d)), 0);
	assert_true(d[0] == 1.5f && d[1] == 2.25f && d[2] == 0.0f);
	assert_int_equal(psl__bps_sum(PSL_BYTEPS_FLOAT32, d, s, 5), -EINVAL); /* not whole */
	assert_int_equal(psl__bps_sum(7, d, s, 4), -EINVAL);		     /* uint16: not summed */
	assert_int_equal(psl__bps_sum(-1, d, s, 4), -EINVAL);
	assert_int_equal(psl__bps_sum3(PSL_BYTEPS_FLOAT32, d, s, s, sizeof(d)), 0);
	assert_true(d[0] == 1.0f && d[1] == 0.5f && d[2] == -6.0f);
	assert_int_equal(psl__bps_sum3(11, d, s, s, 4), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_decode_all),
		cmocka_unit_test(test_f16_encode),
		cmocka_unit_test(test_bf16_convert),
		cmocka_unit_test(test_all_types_lengths),
		cmocka_unit_test(test_half_pairs),
		cmocka_unit_test(test_half_specials),
		cmocka_unit_test(test_half_vector_and_tail),
		cmocka_unit_test(test_byte_api),
	};
	fesetround(FE_TONEAREST);
	return cmocka_run_group_tests(tests, setup_sets, NULL);
}
