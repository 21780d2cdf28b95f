/* The rate limit of peer-caused warnings (core/log.c). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "log.h"

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* A burst of PSL_LOG_BURST passes, the next lines are counted, and the
 * count is handed to the first line allowed again. */
static void test_burst_then_rate(void **state)
{
	struct psl__ratelimit rl = {0};
	int i, sup = -1, allowed = 0;
	(void)state;

	for (i = 0; i < PSL_LOG_BURST; i++) {
		assert_true(psl__ratelimit_ok(&rl, &sup));
		assert_int_equal(sup, 0);
	}
	for (i = 0; i < 100; i++)
		allowed += psl__ratelimit_ok(&rl, &sup);
	/* (a slow machine may have earned a line or two meanwhile) */
	assert_true(allowed <= 3);
	sleep_ms(3 * 1000 / PSL_LOG_RATE);
	assert_true(psl__ratelimit_ok(&rl, &sup));
	assert_true(sup >= 100 - allowed - 1 && sup <= 100);
	assert_true(psl__ratelimit_ok(&rl, &sup) || sup == 0);
}

/* Sites are independent. */
static void test_sites_apart(void **state)
{
	struct psl__ratelimit a = {0}, b = {0};
	int i, sup;
	(void)state;

	for (i = 0; i < PSL_LOG_BURST + 10; i++)
		psl__ratelimit_ok(&a, &sup);
	assert_false(psl__ratelimit_ok(&a, &sup));
	assert_true(psl__ratelimit_ok(&b, &sup));
	assert_int_equal(sup, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_rate),
		cmocka_unit_test(test_sites_apart),
	};
	return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
