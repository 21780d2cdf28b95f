/*
 * Unit tests for include/pslite/van_util.h, the header-only kit every van
 * uses: the greeting (build, classify: MORE, OK, ZMTP, OTHER, names too
 * long), integer and boolean settings through a host of the test's own that
 * captures the log (good, bad, empty, out of range, and the exact error
 * line), the clock and deadlines, and the little-endian helpers.
 * Built with include/ only on its path, as a van is.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pslite/van.h>
#include <pslite/van_util.h>

/* ------------------------------------------------------ capturing host -- */

struct cap {
	const char *names[8], *values[8]; /* the settings this host knows */
	int nlog;			  /* lines logged */
	int level;			  /* level of the last one */
	char van[32];
	char line[512]; /* the last one */
};

static void cap_vlog(void *ctx, int level, const char *van, const char *fmt, va_list ap)
{
	struct cap *c = ctx;
	c->nlog++;
	c->level = level;
	snprintf(c->van, sizeof(c->van), "%s", van);
	vsnprintf(c->line, sizeof(c->line), fmt, ap);
}

static const char *cap_param(void *ctx, const char *name)
{
	struct cap *c = ctx;
	int i;
	for (i = 0; i < 8 && c->names[i]; i++)
		if (!strcmp(c->names[i], name))
			return c->values[i];
	return NULL;
}

static struct cap cap;
static struct psl_van_host host;

static int setup(void **state)
{
	(void)state;
	memset(&cap, 0, sizeof(cap));
	memset(&host, 0, sizeof(host));
	host.abi_version = PSL_VAN_ABI_VERSION;
	host.size = sizeof(host);
	host.ctx = &cap;
	host.log_level = PSL_VAN_LOG_WARN;
	host.vlog = cap_vlog;
	host.param = cap_param;
	return 0;
}

static void set(const char *name, const char *value)
{
	int i;
	for (i = 0; i < 7 && cap.names[i]; i++)
		if (!strcmp(cap.names[i], name))
			break;
	cap.names[i] = name;
	cap.values[i] = value;
}

/* ------------------------------------------------------------ greeting -- */

static void test_greeting_build(void **state)
{
	char buf[PSL_VAN_GREETING_LEN_MAX], name[PSL_VAN_NAME_LEN_MAX + 2];
	size_t n;
	(void)state;
	/* the agreed length of a van name in a greeting (van.h) */
	assert_int_equal(PSL_VAN_NAME_LEN_MAX, 63);
	n = psl_van_greeting_build(buf, sizeof(buf), "ucx");
	assert_int_equal(n, strlen("PSLVAN1 ucx\n"));
	assert_memory_equal(buf, "PSLVAN1 ucx\n", n);
	/* the longest name fits in PSL_VAN_GREETING_LEN_MAX exactly */
	memset(name, 'n', PSL_VAN_NAME_LEN_MAX);
	name[PSL_VAN_NAME_LEN_MAX] = '\0';
	assert_int_equal(psl_van_greeting_build(buf, sizeof(buf), name), sizeof(buf));
	assert_int_equal(buf[sizeof(buf) - 1], '\n');
	/* one more is refused, as are empty names, bad characters, small buffers */
	name[PSL_VAN_NAME_LEN_MAX] = 'n';
	name[PSL_VAN_NAME_LEN_MAX + 1] = '\0';
	assert_int_equal(psl_van_greeting_build(buf, sizeof(buf), name), 0);
	assert_int_equal(psl_van_greeting_build(buf, sizeof(buf), ""), 0);
	assert_int_equal(psl_van_greeting_build(buf, sizeof(buf), NULL), 0);
	assert_int_equal(psl_van_greeting_build(buf, sizeof(buf), "a b"), 0);
	assert_int_equal(psl_van_greeting_build(buf, sizeof(buf), "a\n"), 0);
	assert_int_equal(psl_van_greeting_build(buf, 11, "ucx"), 0);
	assert_int_equal(psl_van_greeting_build(buf, 12, "ucx"), 12);
}

static int parse(const void *b, size_t len, char *name, size_t cap_, size_t *used)
{
	return psl_van_greeting_parse(b, len, name, cap_, used);
}

static void test_greeting_parse(void **state)
{
	const char *g = "PSLVAN1 fabric\nrest";
	char name[PSL_VAN_NAME_LEN_MAX + 1];
	size_t used = 0, i;
	(void)state;
	/* every prefix of a greeting asks for more */
	for (i = 0; i < 15; i++)
		assert_int_equal(parse(g, i, name, sizeof(name), &used), PSL_VAN_GREET_MORE);
	assert_int_equal(parse(g, strlen(g), name, sizeof(name), &used), PSL_VAN_GREET_OK);
	assert_string_equal(name, "fabric");
	assert_int_equal(used, 15); /* "rest" is the van's own protocol */
	/* the greeting a van builds parses back to its name */
	{
		char buf[PSL_VAN_GREETING_LEN_MAX];
		size_t n = psl_van_greeting_build(buf, sizeof(buf), "my-van_2");
		assert_int_equal(parse(buf, n, name, sizeof(name), &used), PSL_VAN_GREET_OK);
		assert_string_equal(name, "my-van_2");
		assert_int_equal(used, n);
	}
	/* used may be NULL */
	assert_int_equal(parse("PSLVAN1 zz\n", 11, name, sizeof(name), NULL), PSL_VAN_GREET_OK);
}

static void test_greeting_zmtp(void **state)
{
	/* ZMTP 3: 0xFF, 8 bytes, 0x7F, then the version */
	static const uint8_t zmtp[] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0};
	static const uint8_t ff_not_zmtp[] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x00};
	char name[8], what[96];
	(void)state;
	assert_int_equal(parse(zmtp, 1, name, sizeof(name), NULL), PSL_VAN_GREET_MORE);
	assert_int_equal(parse(zmtp, 9, name, sizeof(name), NULL), PSL_VAN_GREET_MORE);
	assert_int_equal(parse(zmtp, 10, name, sizeof(name), NULL), PSL_VAN_GREET_ZMTP);
	assert_int_equal(parse(zmtp, sizeof(zmtp), name, sizeof(name), NULL), PSL_VAN_GREET_ZMTP);
	assert_int_equal(parse(ff_not_zmtp, sizeof(ff_not_zmtp), name, sizeof(name), NULL),
			 PSL_VAN_GREET_OTHER);
	assert_non_null(strstr(psl_van_greeting_what(PSL_VAN_GREET_ZMTP, NULL, what, sizeof(what)),
			       "van zmq"));
	assert_string_equal(psl_van_greeting_what(PSL_VAN_GREET_OK, "ucx", what, sizeof(what)),
			    "van ucx");
	assert_string_equal(psl_van_greeting_what(PSL_VAN_GREET_OTHER, NULL, what, sizeof(what)),
			    "an unknown protocol");
}

static void test_greeting_other(void **state)
{
	char name[PSL_VAN_NAME_LEN_MAX + 1], big[8 + PSL_VAN_NAME_LEN_MAX + 2];
	(void)state;
	assert_int_equal(parse("HTTP/1.1 400\r\n", 14, name, sizeof(name), NULL),
			 PSL_VAN_GREET_OTHER);
	assert_int_equal(parse("PSLVAN2 ucx\n", 12, name, sizeof(name), NULL),
			 PSL_VAN_GREET_OTHER);
	assert_int_equal(parse("PSLVAN1 \n", 9, name, sizeof(name), NULL), PSL_VAN_GREET_OTHER);
	assert_int_equal(parse("PSLVAN1 a b\n", 12, name, sizeof(name), NULL),
			 PSL_VAN_GREET_OTHER);
	assert_int_equal(parse("PSLVAN1 a\r\n", 11, name, sizeof(name), NULL),
			 PSL_VAN_GREET_OTHER);
	/* a name of PSL_VAN_NAME_LEN_MAX characters is a van's ... */
	memcpy(big, "PSLVAN1 ", 8);
	memset(big + 8, 'x', PSL_VAN_NAME_LEN_MAX);
	big[8 + PSL_VAN_NAME_LEN_MAX] = '\n';
	assert_int_equal(parse(big, 8 + PSL_VAN_NAME_LEN_MAX + 1, name, sizeof(name), NULL),
			 PSL_VAN_GREET_OK);
	assert_int_equal(strlen(name), PSL_VAN_NAME_LEN_MAX);
	/* ... but not if the caller's buffer cannot hold it */
	assert_int_equal(parse(big, 8 + PSL_VAN_NAME_LEN_MAX + 1, name, 10, NULL),
			 PSL_VAN_GREET_OTHER);
	/* one more character is not, and is not waited for for ever */
	big[8 + PSL_VAN_NAME_LEN_MAX] = 'x';
	assert_int_equal(parse(big, 8 + PSL_VAN_NAME_LEN_MAX, name, sizeof(name), NULL),
			 PSL_VAN_GREET_MORE);
	assert_int_equal(parse(big, 8 + PSL_VAN_NAME_LEN_MAX + 1, name, sizeof(name), NULL),
			 PSL_VAN_GREET_OTHER);
}

/* ------------------------------------------------------------ settings -- */

static void test_param_long_good(void **state)
{
	long x = 0;
	(void)state;
	/* unset and empty: the default, even outside the range (a "not set" mark) */
	assert_int_equal(psl_van_param_long(&host, "van_t", "PS_T", -1, 0, 10, "KiB", &x), 0);
	assert_int_equal(x, -1);
	set("PS_T", "");
	x = 0;
	assert_int_equal(psl_van_param_long(&host, "van_t", "PS_T", 7, 0, 10, "KiB", &x), 0);
	assert_int_equal(x, 7);
	set("PS_T", "10");
	assert_int_equal(psl_van_param_long(&host, "van_t", "PS_T", 7, 0, 10, "KiB", &x), 0);
	assert_int_equal(x, 10);
	set("PS_T", "-3");
	assert_int_equal(psl_van_param_long(&host, "van_t", "PS_T", 7, -3, 10, "KiB", &x), 0);
	assert_int_equal(x, -3);
	assert_int_equal(cap.nlog, 0);
	/* no param callback: the default */
	host.param = NULL;
	assert_int_equal(psl_van_param_long(&host, "van_t", "PS_T", 5, 0, 10, NULL, &x), 0);
	assert_int_equal(x, 5);
}

static void bad(const char *value, long min, long max, const char *unit, const char *line)
{
	long x = 12345;
	set("PS_T", value);
	cap.nlog = 0;
	assert_int_equal(psl_van_param_long(&host, "van_t", "PS_T", 3, min, max, unit, &x),
			 -EINVAL);
	assert_int_equal(x, 12345); /* untouched */
	assert_int_equal(cap.nlog, 1);
	assert_int_equal(cap.level, PSL_VAN_LOG_ERROR);
	assert_string_equal(cap.van, "van_t");
	assert_string_equal(cap.line, line);
}

static void test_param_long_bad(void **state)
{
	(void)state;
	bad("abc", 0, 1000000, "microseconds", "PS_T=abc: expected microseconds from 0 to 1000000");
	bad("12x", 0, 100, "KiB", "PS_T=12x: expected KiB from 0 to 100");
	bad(" ", 0, 100, NULL, "PS_T= : expected an integer from 0 to 100");
	bad("101", 0, 100, NULL, "PS_T=101: expected an integer from 0 to 100");
	bad("-1", 0, 100, "seconds", "PS_T=-1: expected seconds from 0 to 100");
	bad("99999999999999999999", 0, 100, NULL,
	    "PS_T=99999999999999999999: expected an integer from 0 to 100");
	bad("2", 0, 1, NULL, "PS_T=2: expected 0 or 1");
	bad("1.5", 4, 65536, "a number of receive buffers",
	    "PS_T=1.5: expected a number of receive buffers from 4 to 65536");
}

static void test_param_bool(void **state)
{
	bool b = false;
	(void)state;
	assert_int_equal(psl_van_param_bool(&host, "van_t", "PS_B", true, &b), 0);
	assert_true(b);
	set("PS_B", "0");
	assert_int_equal(psl_van_param_bool(&host, "van_t", "PS_B", true, &b), 0);
	assert_false(b);
	set("PS_B", "1");
	assert_int_equal(psl_van_param_bool(&host, "van_t", "PS_B", false, &b), 0);
	assert_true(b);
	set("PS_B", "yes");
	b = false;
	assert_int_equal(psl_van_param_bool(&host, "van_t", "PS_B", true, &b), -EINVAL);
	assert_false(b);
	assert_int_equal(cap.nlog, 1);
	assert_string_equal(cap.line, "PS_B=yes: expected 0 or 1");
	/* printed whenever the host's level lets errors through */
	host.log_level = PSL_VAN_LOG_ERROR;
	assert_int_equal(psl_van_param_bool(&host, "van_t", "PS_B", true, &b), -EINVAL);
	assert_int_equal(cap.nlog, 2);
	assert_string_equal(psl_van_param(&host, "PS_B"), "yes");
	assert_null(psl_van_param(&host, "PS_NONE"));
	assert_null(psl_van_param(NULL, "PS_B"));
}

/* --------------------------------------------------------------- clock -- */

static void test_clock(void **state)
{
	int64_t a = psl_van_now_ns(), b, ms = psl_van_now_ms();
	struct timespec d, now;
	(void)state;
	b = psl_van_now_ns();
	assert_true(b >= a);
	assert_true(ms >= a / 1000000 && ms <= b / 1000000 + 1);
	d = psl_van_deadline(1500);
	clock_gettime(CLOCK_MONOTONIC, &now);
	assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000);
	{
		int64_t dl = (int64_t)d.tv_sec * 1000000000 + d.tv_nsec;
		int64_t n = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		assert_true(dl > n && dl <= n + 1500 * (int64_t)1000000);
	}
	/* a negative wait is now */
	d = psl_van_deadline(-5);
	clock_gettime(CLOCK_MONOTONIC, &now);
	assert_true((int64_t)d.tv_sec * 1000000000 + d.tv_nsec <=
		    (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
}

/* ---------------------------------------------------------- byte order -- */

static void test_le(void **state)
{
	uint8_t b[9];
	static const uint8_t w64[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
	uint64_t vals[] = {0, 1, 0x80, 0xffffffffffffffffull, 0x8000000000000001ull,
			   0x0123456789abcdefull};
	size_t i;
	(void)state;
	memset(b, 0xee, sizeof(b));
	psl_van_put_le16(b + 1, 0x0102);
	assert_int_equal(b[1], 0x02);
	assert_int_equal(b[2], 0x01);
	assert_int_equal(b[0], 0xee);
	assert_int_equal(b[3], 0xee);
	assert_int_equal(psl_van_get_le16(b + 1), 0x0102);
	psl_van_put_le32(b + 1, 0x01020304u);
	assert_memory_equal(b + 1, "\x04\x03\x02\x01", 4);
	assert_int_equal(b[5], 0xee);
	assert_int_equal(psl_van_get_le32(b + 1), 0x01020304u);
	psl_van_put_le64(b + 1, 0x0102030405060708ull);
	assert_memory_equal(b + 1, w64, 8);
	assert_int_equal(b[0], 0xee);
	assert_true(psl_van_get_le64(b + 1) == 0x0102030405060708ull);
	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		psl_van_put_le64(b, vals[i]);
		assert_true(psl_van_get_le64(b) == vals[i]);
		psl_van_put_le32(b, (uint32_t)vals[i]);
		assert_true(psl_van_get_le32(b) == (uint32_t)vals[i]);
		psl_van_put_le16(b, (uint16_t)vals[i]);
		assert_true(psl_van_get_le16(b) == (uint16_t)vals[i]);
	}
}

/* The block cache: a put block comes back from the next get, at most max
 * are kept, records larger than a block are plain mallocs; under
 * AddressSanitizer nothing is kept. */
static void test_cache(void **state)
{
	static struct psl_van_cache c = PSL_VAN_CACHE_INIT(2, 64);
	void *a, *b, *d, *big;
	(void)state;
	a = psl_van_cache_get(&c, 40);
	b = psl_van_cache_get(&c, 64);
	d = psl_van_cache_get(&c, 8);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(d);
	memset(a, 1, 64); /* a block is whole, whatever size was asked */
	big = psl_van_cache_get(&c, 4096);
	assert_non_null(big);
	memset(big, 2, 4096);
	psl_van_cache_put(&c, big, 4096); /* freed, not kept */
	psl_van_cache_put(&c, a, 40);
	psl_van_cache_put(&c, b, 64);
	psl_van_cache_put(&c, d, 8); /* the third: freed */
	psl_van_cache_put(&c, NULL, 8);
#if defined(__SANITIZE_ADDRESS__)
	assert_int_equal(c.n, 0);
#else
	assert_int_equal(c.n, 2);
	assert_ptr_equal(psl_van_cache_get(&c, 1), b); /* last in, first out */
	assert_ptr_equal(psl_van_cache_get(&c, 64), a);
	assert_int_equal(c.n, 0);
	psl_van_cache_put(&c, a, 64);
	psl_van_cache_put(&c, b, 64);
	a = psl_van_cache_get(&c, 1);
	b = psl_van_cache_get(&c, 1);
	free(a);
	free(b);
#endif
	while ((a = c.head)) { /* what is kept is the cache's to free */
		memcpy(&c.head, a, sizeof(void *));
		free(a);
	}
}

/* PS_BUSY_POLL's window: opens on a message, ends at its length; a late
 * yield ends it; PSL_VAN_SPIN_STRIKES late ones close together pause
 * windows, the pause doubling up to its bound; a lone late one does not;
 * clean windows bring the pause back to its minimum. */
static void late_yield(struct psl_van_spin *s, int64_t *t)
{
	psl_van_spin_hit(s, *t);
	assert_true(psl_van_spinning(s, *t));
	assert_false(psl_van_spin_yielded(s, *t, *t + 4000000)); /* a 4 ms tick */
	*t += 4000000;
	assert_false(psl_van_spinning(s, *t)); /* the window ended */
}

static void test_spin(void **state)
{
	struct psl_van_spin s;
	const int64_t ms = 1000000, w = 200000; /* a 200 us window */
	int64_t t = 1000 * ms, pause;
	int i, k;
	(void)state;

	psl_van_spin_init(&s, 0); /* PS_BUSY_POLL=0: never a window */
	psl_van_spin_hit(&s, t);
	assert_false(psl_van_spinning(&s, t));

	psl_van_spin_init(&s, w);
	assert_false(psl_van_spinning(&s, t));
	psl_van_spin_hit(&s, t);
	assert_true(psl_van_spinning(&s, t + w - 1));
	assert_true(psl_van_spin_yielded(&s, t, t + PSL_VAN_SPIN_LATE_NS - 1));
	assert_true(psl_van_spinning(&s, t + w - 1));
	psl_van_spin_hit(&s, t + w - 1); /* a message pushes the end */
	assert_true(psl_van_spinning(&s, t + 2 * w - 2));
	assert_false(psl_van_spinning(&s, t + 2 * w - 1));
	assert_false(psl_van_spinning(&s, t + 2 * w)); /* stays closed */
	assert_int_equal(s.lates, 0);

	/* late yields far apart (a VM's CPU taken away now and then): each
	 * ends its window, none pauses the next */
	for (i = 0; i < 5; i++) {
		t += PSL_VAN_SPIN_STRIKE_GAP_NS;
		late_yield(&s, &t);
		psl_van_spin_hit(&s, t);
		assert_true(psl_van_spinning(&s, t));
	}
	assert_int_equal(s.lates, 5);
	assert_int_equal(s.pauses, 0);

	/* late yields close together: the CPUs are wanted; no window opens
	 * for the pause, then twice as long, and so on up to the bound */
	pause = PSL_VAN_SPIN_PAUSE_MIN_NS;
	for (k = 0; k < 8; k++) {
		t += PSL_VAN_SPIN_STRIKE_GAP_NS;
		for (i = 0; i < PSL_VAN_SPIN_STRIKES; i++)
			late_yield(&s, &t);
		assert_int_equal(s.pauses, k + 1);
		psl_van_spin_hit(&s, t + pause - 1);
		assert_false(psl_van_spinning(&s, t + pause - 1));
		t += pause;
		psl_van_spin_hit(&s, t);
		assert_true(psl_van_spinning(&s, t));
		if (pause < PSL_VAN_SPIN_PAUSE_MAX_NS)
			pause *= 2;
	}
	assert_int_equal(s.pause_ns, PSL_VAN_SPIN_PAUSE_MAX_NS);

	/* clean windows in a row bring the pause back down */
	for (i = 0; i < PSL_VAN_SPIN_CLEAN; i++) {
		psl_van_spin_hit(&s, t);
		assert_true(psl_van_spin_yielded(&s, t, t + 1000));
		t += w;
		assert_false(psl_van_spinning(&s, t));
	}
	assert_int_equal(s.pause_ns, PSL_VAN_SPIN_PAUSE_MIN_NS);

	/* and the real yield runs */
	psl_van_spin_hit(&s, psl_van_now_ns());
	(void)psl_van_spin_yield(&s);
}

/* PS_BUSY_POLL=auto's window: a message at t, then an idle round, then the
 * next message gap_ns later; returns whether the window was open then. */
static bool auto_step(struct psl_van_spin *s, struct psl_van_spin_auto *a, int64_t *t,
		      int64_t gap_ns)
{
	bool open;
	psl_van_spin_auto_spinning(s, a, *t + 1); /* an idle round */
	*t += gap_ns;
	open = s->open && *t < s->until;
	psl_van_spin_auto_hit(s, a, *t);
	return open;
}

static void test_spin_auto(void **state)
{
	struct psl_van_spin s;
	struct psl_van_spin_auto a;
	int64_t t = 1000000000LL;
	int i;
	(void)state;

	assert_false(psl_van_spin_auto_init(&s, &a, 1, 200000)); /* PS_BUSY_POLL=1 */
	assert_true(psl_van_spin_auto_init(&s, &a, 2, 50000));	 /* auto, cap 50 us */
	psl_van_spin_auto_hit(&s, &a, t);
	for (i = 0; i < PSL_VAN_AUTO_GAPS - 1; i++) /* too few gaps: no window */
		assert_false(auto_step(&s, &a, &t, 10000));
	assert_int_equal(psl_van_spin_auto_window(&a), 0);
	assert_false(auto_step(&s, &a, &t, 10000)); /* the 4th gap opens windows */
	assert_int_equal(psl_van_spin_auto_window(&a), 20000); /* twice the gap */
	assert_true(s.open);
	assert_true(auto_step(&s, &a, &t, 15000)); /* within the window */
	for (i = 0; i < PSL_VAN_AUTO_GAPS; i++)
		auto_step(&s, &a, &t, 40000);
	assert_int_equal(psl_van_spin_auto_window(&a), 50000); /* 80 us, capped */
	/* gaps over 0.2 ms (twice: the second longest decides): no window */
	auto_step(&s, &a, &t, 300000);
	assert_int_equal(psl_van_spin_auto_window(&a), 50000);
	auto_step(&s, &a, &t, 300000);
	assert_int_equal(psl_van_spin_auto_window(&a), 0);
	assert_false(s.open && t + 1 < s.until); /* no window after this message */
	/* short gaps again; then windows that run out 4 times in a row rest
	 * for PSL_VAN_AUTO_REST gaps */
	for (i = 0; i < PSL_VAN_AUTO_GAPS; i++)
		auto_step(&s, &a, &t, 10000);
	assert_int_equal(psl_van_spin_auto_window(&a), 20000);
	for (i = 0; i < PSL_VAN_AUTO_MISSES; i++) {
		assert_true(s.open);
		assert_false(psl_van_spin_auto_spinning(&s, &a, t + 120000)); /* ran out */
		t += 120000;
		psl_van_spin_auto_hit(&s, &a, t);
	}
	/* (the message after the 4th counted one gap of the rest already) */
	assert_int_equal(a.rest, PSL_VAN_AUTO_REST - 1);
	assert_int_equal(psl_van_spin_auto_window(&a), 0);
	for (i = 0; i < PSL_VAN_AUTO_REST - 1; i++)
		assert_false(auto_step(&s, &a, &t, 10000));
	assert_int_equal(psl_van_spin_auto_window(&a), 20000); /* rested */
	assert_true(auto_step(&s, &a, &t, 10000));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_greeting_build, setup),
		cmocka_unit_test_setup(test_greeting_parse, setup),
		cmocka_unit_test_setup(test_greeting_zmtp, setup),
		cmocka_unit_test_setup(test_greeting_other, setup),
		cmocka_unit_test_setup(test_param_long_good, setup),
		cmocka_unit_test_setup(test_param_long_bad, setup),
		cmocka_unit_test_setup(test_param_bool, setup),
		cmocka_unit_test_setup(test_clock, setup),
		cmocka_unit_test_setup(test_le, setup),
		cmocka_unit_test_setup(test_cache, setup),
		cmocka_unit_test_setup(test_spin, setup),
		cmocka_unit_test_setup(test_spin_auto, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
