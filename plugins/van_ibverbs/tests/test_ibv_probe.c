/* Unit tests of van_ibverbs's TCP probe (ibv_probe.c): the verdict on the
 * first bytes of a port, and real probes of loopback listeners that greet as
 * another van, speak ZMTP, stay silent, speak something else or refuse. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ibv_probe.h"

static const uint8_t zmtp[10] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f};

static int judge(const void *buf, size_t len, bool ended, char *what)
{
	what[0] = '\0';
	return ibv_probe_judge(buf, len, ended, what, 128);
}

static void test_judge(void **state)
{
	char what[128];
	(void)state;
	assert_int_equal(judge("PSLVAN1 vtother\n", 16, false, what), IBV_PROBE_OTHER);
	assert_string_equal(what, "van vtother");
	assert_int_equal(judge(zmtp, sizeof(zmtp), false, what), IBV_PROBE_OTHER);
	assert_non_null(strstr(what, "ZeroMQ"));
	/* not enough yet: wait, unless no more will come */
	assert_int_equal(judge("PSLVAN1 vto", 11, false, what), IBV_PROBE_WAIT);
	assert_int_equal(judge("PSLVAN1 vto", 11, true, what), IBV_PROBE_NONE);
	assert_int_equal(judge(zmtp, 5, false, what), IBV_PROBE_WAIT);
	assert_int_equal(judge("", 0, false, what), IBV_PROBE_WAIT);
	assert_int_equal(judge("", 0, true, what), IBV_PROBE_NONE);
	/* something else, and a greeting in van_ibverbs's own name: no verdict */
	assert_int_equal(judge("SSH-2.0-OpenSSH\r\n", 17, false, what), IBV_PROBE_NONE);
	assert_int_equal(judge("PSLVAN1 ibverbs\n", 16, false, what), IBV_PROBE_NONE);
	assert_int_equal(judge("PSLVAN1 bad name\n", 17, false, what), IBV_PROBE_NONE);
	/* ZMTP's first byte without its tenth */
	assert_int_equal(judge("\xff" "123456789", 10, false, what), IBV_PROBE_NONE);
}

/* A listener on 127.0.0.1; returns its fd, its port in *port. */
static int listener(int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (void *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (void *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Steps p (times from t) until decided, at most 301 steps of 5 ms (past IBV_PROBE_MS). */
static int run(struct ibv_probe *p, int64_t t, char *what)
{
	int i, r = IBV_PROBE_WAIT;
	for (i = 0; i <= 300 && r == IBV_PROBE_WAIT; i++) {
		r = ibv_probe_step(p, t + i * 5, what, 128);
		if (r == IBV_PROBE_WAIT)
			usleep(5000);
	}
	return r;
}

/* A port that answers with what[len] (NULL: stays silent). */
static int probe_answer(const void *ans, size_t len, char *what)
{
	struct ibv_probe p;
	int port, lfd = listener(&port), c, r;

	ibv_probe_init(&p);
	assert_int_equal(ibv_probe_start(&p, "127.0.0.1", port, 1000), 0);
	assert_true(p.fd >= 0);
	c = accept(lfd, NULL, NULL);
	assert_true(c >= 0);
	if (ans)
		assert_int_equal(send(c, ans, len, 0), (ssize_t)len);
	what[0] = '\0';
	r = run(&p, 1000, what);
	assert_int_equal(p.fd, -1); /* closed once decided */
	close(c);
	close(lfd);
	return r;
}

static void test_probe_van(void **state)
{
	char what[128];
	(void)state;
	assert_int_equal(probe_answer("PSLVAN1 vtother\n", 16, what), IBV_PROBE_OTHER);
	assert_string_equal(what, "van vtother");
	assert_int_equal(probe_answer(zmtp, sizeof(zmtp), what), IBV_PROBE_OTHER);
	assert_non_null(strstr(what, "ZeroMQ"));
}

static void test_probe_no_verdict(void **state)
{
	char what[128];
	(void)state;
	assert_int_equal(probe_answer("HTTP/1.1 400\r\n", 14, what), IBV_PROBE_NONE);
	assert_int_equal(probe_answer(NULL, 0, what), IBV_PROBE_NONE); /* silent: time up */
	assert_string_equal(what, "");
}

/* A greeting in two pieces: no verdict on the first */
static void test_probe_split(void **state)
{
	struct ibv_probe p;
	char what[128] = "";
	int port, lfd = listener(&port), c, i, r = IBV_PROBE_WAIT;
	(void)state;
	ibv_probe_init(&p);
	assert_int_equal(ibv_probe_start(&p, "localhost", port, 0), 0);
	c = accept(lfd, NULL, NULL);
	assert_true(c >= 0);
	assert_int_equal(send(c, "PSLVAN1 vt", 10, 0), 10);
	for (i = 0; i < 20; i++) {
		assert_int_equal(ibv_probe_step(&p, 1, what, sizeof(what)), IBV_PROBE_WAIT);
		usleep(2000);
	}
	assert_int_equal(send(c, "other\n", 6, 0), 6);
	for (i = 0; i < 200 && r == IBV_PROBE_WAIT; i++) {
		r = ibv_probe_step(&p, 2, what, sizeof(what));
		usleep(2000);
	}
	assert_int_equal(r, IBV_PROBE_OTHER);
	assert_string_equal(what, "van vtother");
	close(c);
	close(lfd);
}

/* Nothing listens: refused, no verdict, fd closed; and a dropped probe
 * closes its fd */
static void test_probe_refused(void **state)
{
	struct ibv_probe p;
	char what[128] = "";
	int port, lfd = listener(&port);
	(void)state;
	close(lfd);
	ibv_probe_init(&p);
	if (ibv_probe_start(&p, "127.0.0.1", port, 0) == 0)
		assert_int_equal(run(&p, 0, what), IBV_PROBE_NONE);
	assert_int_equal(p.fd, -1);
	lfd = listener(&port);
	assert_int_equal(ibv_probe_start(&p, "127.0.0.1", port, 0), 0);
	assert_true(p.fd >= 0);
	ibv_probe_close(&p);
	assert_int_equal(p.fd, -1);
	assert_int_equal(ibv_probe_step(&p, 0, what, sizeof(what)), IBV_PROBE_NONE);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_judge),
		cmocka_unit_test(test_probe_van),
		cmocka_unit_test(test_probe_no_verdict),
		cmocka_unit_test(test_probe_split),
		cmocka_unit_test(test_probe_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
