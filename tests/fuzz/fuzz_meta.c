/*
 * libFuzzer target for psl__meta_decode (built with ./configure --enable-fuzz
 * CC=clang). Run it with, for example:
 *   tests/fuzz/fuzz_meta_driver --write-seeds corpus/
 *   tests/fuzz/fuzz_meta -max_len=4096 corpus/
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "fuzz_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_meta_one(data, size);
	return 0;
}
