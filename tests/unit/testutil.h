/* Helpers shared by the unit test drivers (header only). */
#ifndef PSL_TESTUTIL_H
#define PSL_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* Captures what the code under test writes to stderr (the log). */
struct capture {
	FILE *tmp;
	int saved;
};

static inline void capture_start(struct capture *c)
{
	fflush(stderr);
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	c->saved = dup(2);
	assert_true(c->saved >= 0);
	assert_true(dup2(fileno(c->tmp), 2) >= 0);
}

/* Ends the capture; returns what was written (malloc'ed, NUL-terminated) and
 * echoes it to the real stderr so that a failing test shows it. */
static inline char *capture_end(struct capture *c)
{
	long n;
	char *buf;
	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	n = ftell(c->tmp);
	assert_true(n >= 0);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	rewind(c->tmp);
	if (n > 0)
		assert_int_equal(fread(buf, 1, (size_t)n, c->tmp), (size_t)n);
	fclose(c->tmp);
	if (n > 0)
		fprintf(stderr, "  | %s", buf);
	return buf;
}

/* Number of lines of s that contain needle. */
static inline int count_lines_with(const char *s, const char *needle)
{
	int n = 0;
	while (s && *s) {
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s);
		char *line = strndup(s, len);
		if (line && strstr(line, needle))
			n++;
		free(line);
		s += len + (nl ? 1 : 0);
	}
	return n;
}

#define assert_contains(hay, needle)                                                    \
	do {                                                                            \
		const char *h_ = (hay), *n_ = (needle);                                 \
		if (!h_ || !strstr(h_, n_))                                             \
			fail_msg("expected \"%s\" in \"%s\"", n_, h_ ? h_ : "(null)"); \
	} while (0)

#define assert_not_contains(hay, needle)                                                    \
	do {                                                                                \
		const char *h_ = (hay), *n_ = (needle);                                     \
		if (h_ && strstr(h_, n_))                                                   \
			fail_msg("did not expect \"%s\" in \"%s\"", n_, h_);                \
	} while (0)

#endif
