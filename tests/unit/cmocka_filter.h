/* Put in front of every cmocka driver's sources (-include, see
 * tests/Makefile.inc): PSL_TEST_FILTER=PATTERN runs only the tests of a
 * driver whose names match PATTERN (cmocka's wildcards: * and ?), e.g.
 *   PSL_TEST_FILTER='*barrier*' tests/unit/test_control */
#ifndef PSL_TEST_FILTER_H
#define PSL_TEST_FILTER_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

__attribute__((constructor)) static void psl__test_filter_init(void)
{
	const char *f = getenv("PSL_TEST_FILTER");
	if (f && *f)
		cmocka_set_test_filter(f);
}

#endif
