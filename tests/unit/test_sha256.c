/*
 * Unit tests for core/sha256.c: SHA-256 against FIPS 180-2's examples
 * (appendix B) and HMAC-SHA256 against RFC 4231's test cases 1-4, 6 and 7.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sha256.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
	size_t i;
	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void check_sha(const void *data, size_t len, const char *want)
{
	uint8_t d[32];
	char h[65];
	psl__sha256(data, len, d);
	hex(d, 32, h);
	assert_string_equal(h, want);
}

static void test_fips180_2(void **state)
{
	struct psl__sha256 s;
	uint8_t d[32], a[1000];
	char h[65];
	int i;
	(void)state;
	check_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	check_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	check_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	/* one million 'a', fed in pieces of 1000 */
	memset(a, 'a', sizeof(a));
	psl__sha256_init(&s);
	for (i = 0; i < 1000; i++)
		psl__sha256_update(&s, a, sizeof(a));
	psl__sha256_final(&s, d);
	hex(d, 32, h);
	assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void check_hmac(const void *key, size_t klen, const void *msg, size_t mlen,
		       const char *want, size_t nbytes)
{
	uint8_t d[32];
	char h[65];
	psl__hmac_sha256(key, klen, msg, mlen, d);
	hex(d, nbytes, h);
	assert_string_equal(h, want);
}

static void test_rfc4231(void **state)
{
	uint8_t k[131], m[50];
	(void)state;
	memset(k, 0x0b, 20);
	check_hmac(k, 20, "Hi There", 8,
		   "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32);
	check_hmac("Jefe", 4, "what do ya want for nothing?", 28,
		   "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32);
	memset(k, 0xaa, 20);
	memset(m, 0xdd, 50);
	check_hmac(k, 20, m, 50,
		   "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 32);
	{
		uint8_t k4[25];
		int i;
		for (i = 0; i < 25; i++)
			k4[i] = (uint8_t)(i + 1);
		memset(m, 0xcd, 50);
		check_hmac(k4, 25, m, 50,
			   "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
			   32);
	}
	memset(k, 0xaa, 131);
	check_hmac(k, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
		   "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32);
	{
		const char *t7 = "This is a test using a larger than block-size key and a larger "
				 "than block-size data. The key needs to be hashed before being "
				 "used by the HMAC algorithm.";
		check_hmac(k, 131, t7, strlen(t7),
			   "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
			   32);
	}
}

static void test_memeq(void **state)
{
	(void)state;
	assert_true(psl__memeq_ct("abcd", "abcd", 4));
	assert_false(psl__memeq_ct("abcd", "abce", 4));
	assert_true(psl__memeq_ct("", "", 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fips180_2),
		cmocka_unit_test(test_rfc4231),
		cmocka_unit_test(test_memeq),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
