/* SHA-256 (FIPS 180-2) and HMAC-SHA256 (RFC 2104), for the job secret's
 * proofs: small, no library. */
#ifndef PSL_CORE_SHA256_H
#define PSL_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct psl__sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	uint8_t buf[64];
	size_t nbuf;
};

void psl__sha256_init(struct psl__sha256 *s);
void psl__sha256_update(struct psl__sha256 *s, const void *data, size_t len);
void psl__sha256_final(struct psl__sha256 *s, uint8_t out[32]);
void psl__sha256(const void *data, size_t len, uint8_t out[32]);
void psl__hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len,
		      uint8_t out[32]);
/* Compares n bytes in time that does not depend on where they differ. */
int psl__memeq_ct(const void *a, const void *b, size_t n);

#endif
