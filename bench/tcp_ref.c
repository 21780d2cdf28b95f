/*
 * tcp_ref: the raw TCP reference for pslite-bench. What push/pull can reach
 * over TCP on this machine, with no library in between.
 *
 *   tcp_ref BYTES WINDOW SECONDS [echo|push|pull] [--json]
 *
 * Forks a server on a loopback port, then keeps WINDOW messages in flight
 * over one TCP connection for SECONDS seconds:
 *   echo  each message of BYTES is echoed back whole (push-pull's traffic)
 *   push  each message of BYTES is answered with an 8-byte ack
 *   pull  an 8-byte request is answered with BYTES
 * and prints goodput (BYTES per completed message, as pslite-bench counts it)
 * and round-trip percentiles. Messages are framed by an 8-byte length.
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ECHO, PUSH, PULL };

static size_t g_bytes;
static int g_window, g_mode;
static double g_seconds;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int full_io(int fd, void *buf, size_t n, int wr)
{
	char *p = buf;
	while (n) {
		ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* server: read a framed message, answer as the mode says */
static void serve(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	char *buf = malloc(g_bytes + 8);
	uint64_t len, ack = 0; /* an empty message */
	if (fd < 0 || !buf)
		_exit(1);
	nodelay(fd);
	for (;;) {
		if (full_io(fd, &len, 8, 0) || len > g_bytes + 8 || full_io(fd, buf, len, 0))
			break;
		if (g_mode == ECHO) {
			if (full_io(fd, &len, 8, 1) || full_io(fd, buf, len, 1))
				break;
		} else if (g_mode == PUSH) {
			if (full_io(fd, &ack, 8, 1))
				break;
		} else {
			uint64_t out = g_bytes;
			if (full_io(fd, &out, 8, 1) || full_io(fd, buf, g_bytes, 1))
				break;
		}
	}
	_exit(0);
}

static sem_t g_slots;
static int g_fd;
static volatile int g_stop;
static double *g_sent_at; /* ring of send times, WINDOW deep */
static double *g_lat;
static size_t g_nlat, g_caplat;
static long g_done;

static void *receiver(void *arg)
{
	char *buf = malloc(g_bytes + 8);
	long i = 0;
	(void)arg;
	for (;;) {
		uint64_t len;
		double t;
		if (full_io(g_fd, &len, 8, 0) || len > g_bytes + 8 || full_io(g_fd, buf, len, 0))
			break;
		t = now_s();
		if (g_nlat < g_caplat)
			g_lat[g_nlat++] = t - g_sent_at[i % g_window];
		i++;
		__atomic_store_n(&g_done, i, __ATOMIC_RELEASE);
		sem_post(&g_slots);
	}
	free(buf);
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	int lfd, json = 0, i;
	pid_t pid;
	pthread_t rt;
	char *msg;
	double t0, t1, gbps;
	long sent = 0;
	const char *mode_names[] = {"echo", "push", "pull"};

	if (argc < 4) {
		fprintf(stderr, "usage: tcp_ref BYTES WINDOW SECONDS [echo|push|pull] [--json]\n");
		return 2;
	}
	g_bytes = strtoul(argv[1], NULL, 10);
	g_window = atoi(argv[2]);
	g_seconds = atof(argv[3]);
	for (i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "push"))
			g_mode = PUSH;
		else if (!strcmp(argv[i], "pull"))
			g_mode = PULL;
		else if (strcmp(argv[i], "echo"))
			return fprintf(stderr, "tcp_ref: unknown mode %s\n", argv[i]), 2;
	}
	if (!g_bytes || g_window < 1 || g_seconds <= 0)
		return fprintf(stderr, "tcp_ref: expected BYTES > 0, WINDOW >= 1, SECONDS > 0\n"), 2;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen))
		return perror("tcp_ref: listen"), 1;
	pid = fork();
	if (pid == 0)
		serve(lfd);
	close(lfd);
	g_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(g_fd, (struct sockaddr *)&a, sizeof(a)))
		return perror("tcp_ref: connect"), 1;
	nodelay(g_fd);
	msg = malloc(g_bytes + 8);
	memset(msg, 1, g_bytes + 8);
	g_sent_at = calloc((size_t)g_window, sizeof(double));
	g_caplat = 2000000;
	g_lat = malloc(g_caplat * sizeof(double));
	sem_init(&g_slots, 0, (unsigned)g_window);
	pthread_create(&rt, NULL, receiver, NULL);

	t0 = now_s();
	while (now_s() - t0 < g_seconds) {
		uint64_t len = g_mode == PULL ? 8 : g_bytes;
		sem_wait(&g_slots);
		g_sent_at[sent % g_window] = now_s();
		memcpy(msg, &len, 8);
		if (full_io(g_fd, msg, 8 + len, 1))
			break;
		sent++;
	}
	while (__atomic_load_n(&g_done, __ATOMIC_ACQUIRE) < sent)
		sem_wait(&g_slots);
	t1 = now_s();
	shutdown(g_fd, SHUT_RDWR);
	pthread_join(rt, NULL);
	close(g_fd);
	waitpid(pid, NULL, 0);

	gbps = 8.0 * (double)g_bytes * (double)g_done / ((t1 - t0) * 1e9);
	qsort(g_lat, g_nlat, sizeof(double), cmp_d);
#define PCT(p) (g_nlat ? g_lat[(size_t)((double)(g_nlat - 1) * (p))] * 1e6 : 0)
	if (json)
		printf("{\"tool\":\"tcp_ref\",\"mode\":\"%s\",\"bytes\":%zu,\"window\":%d,"
		       "\"goodput_gbps\":%.4f,\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,"
		       "\"messages\":%ld}\n",
		       mode_names[g_mode], g_bytes, g_window, gbps, PCT(0.5), PCT(0.99), PCT(0.999),
		       g_done);
	else
		printf("tcp_ref %s %zu bytes, window %d: goodput %.4f Gbps, p50 %.1f us, p99 %.1f "
		       "us, p999 %.1f us, %ld messages\n",
		       mode_names[g_mode], g_bytes, g_window, gbps, PCT(0.5), PCT(0.99), PCT(0.999),
		       g_done);
	return 0;
}
