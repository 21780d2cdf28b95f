/*
 * float16 and bfloat16 <-> float32 conversions, round to nearest even, written
 * without branches (selects on masks) so that loops of them vectorise.
 * Header-only: the summing kernels and the check client share it.
 *
 * Summing two halves through float and rounding once back is the correctly
 * rounded half sum: float's 24-bit significand is at least 2p + 2 for both
 * float16 (p = 11) and bfloat16 (p = 8), so the double rounding is harmless.
 */
#ifndef PSL_SERVER_BPS_HALF_H
#define PSL_SERVER_BPS_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t psl__f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float psl__f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* An all-ones mask if c, else 0. */
static inline uint32_t psl__mask32(int c)
{
	return 0u - (uint32_t)(c != 0);
}

/* float16 -> float32, exact (subnormals, infinities and NaN payloads kept). */
static inline float psl__f16_to_f32(uint16_t h)
{
	uint32_t em = h & 0x7fffu;
	/* exponent and mantissa moved into place, then rebiased by 2^(127-15):
	 * a half subnormal lands on a float subnormal that the multiplication
	 * normalises exactly */
	float f = psl__f32_from_bits(em << 13) * 0x1p112f;
	uint32_t u = psl__f32_bits(f) | (0x7f800000u & psl__mask32(em >= 0x7c00u));
	return psl__f32_from_bits(u | ((uint32_t)(h & 0x8000u) << 16));
}

/* float32 -> float16, round to nearest even; overflow gives infinity, NaN
 * gives a quiet NaN of the same sign. */
static inline uint16_t psl__f32_to_f16(float f)
{
	uint32_t u = psl__f32_bits(f);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;
	/* below 2^-14 (half subnormals and zero): adding 0.5 puts the half
	 * mantissa in the low bits of 0.5's float, rounded by the FPU */
	uint32_t sub = psl__f32_bits(psl__f32_from_bits(a) + 0.5f) - 0x3f000000u;
	/* normal: rebias the exponent (-112 << 23), round to nearest even on
	 * the 13 bits dropped; a carry into the exponent is the right answer */
	uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
	uint32_t m = psl__mask32(a < 0x38800000u);
	uint32_t r = (sub & m) | (norm & ~m);
	m = psl__mask32(a >= 0x477ff000u); /* rounds to 2^16 or more: infinity */
	r = (0x7c00u & m) | (r & ~m);
	m = psl__mask32(a > 0x7f800000u); /* NaN */
	r = (0x7e00u & m) | (r & ~m);
	return (uint16_t)(r | sign);
}

/* bfloat16 -> float32, exact. */
static inline float psl__bf16_to_f32(uint16_t h)
{
	return psl__f32_from_bits((uint32_t)h << 16);
}

/* float32 -> bfloat16, round to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t psl__f32_to_bf16(float f)
{
	uint32_t u = psl__f32_bits(f);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t m = psl__mask32((u & 0x7fffffffu) > 0x7f800000u);
	return (uint16_t)((((u >> 16) | 0x40u) & m) | (r & ~m));
}

#endif
