/* van_ibverbs: the TCP probe of a peer that rdmacm cannot reach (ibv_probe.h).
 * Runs on the progress thread: nothing here blocks, every fd is closed once
 * its probe is decided or dropped. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ibv_probe.h"

void ibv_probe_init(struct ibv_probe *p)
{
	memset(p, 0, sizeof(*p));
	p->fd = -1;
}

void ibv_probe_close(struct ibv_probe *p)
{
	if (p->fd >= 0)
		close(p->fd);
	ibv_probe_init(p);
}

int ibv_probe_judge(const uint8_t *buf, size_t len, bool ended, char *what, size_t cap)
{
	char name[PSL_VAN_NAME_LEN_MAX + 1], tmp[PSL_VAN_NAME_LEN_MAX + 8];
	int kind = psl_van_greeting_parse(buf, len, name, sizeof(name), NULL);

	if (kind == PSL_VAN_GREET_MORE)
		return ended || len >= PSL_VAN_GREETING_LEN_MAX ? IBV_PROBE_NONE : IBV_PROBE_WAIT;
	/* van_ibverbs itself listens on rdmacm only: a greeting in its name
	 * is no evidence of another van */
	if (kind == PSL_VAN_GREET_OTHER || (kind == PSL_VAN_GREET_OK && !strcmp(name, "ibverbs")))
		return IBV_PROBE_NONE;
	snprintf(what, cap, "%s", psl_van_greeting_what(kind, name, tmp, sizeof(tmp)));
	return IBV_PROBE_OTHER;
}

static int probe_addr(const char *host, int port, struct sockaddr_in *sa)
{
	struct addrinfo hints, *res = NULL;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host && *host ? host : "127.0.0.1", NULL, &hints, &res) || !res)
		return -EHOSTUNREACH;
	memcpy(sa, res->ai_addr, sizeof(*sa));
	sa->sin_port = htons((uint16_t)port);
	freeaddrinfo(res);
	return 0;
}

int ibv_probe_start(struct ibv_probe *p, const char *host, int port, int64_t now_ms)
{
	struct sockaddr_in sa;
	int fd, rc;

	ibv_probe_close(p);
	rc = probe_addr(host, port, &sa);
	if (rc)
		return rc;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		rc = -errno;
		close(fd);
		return rc;
	}
	p->fd = fd;
	p->deadline_ms = now_ms + IBV_PROBE_MS;
	return 0;
}

/* The connection's outcome: 1 connected, 0 not yet, -errno refused. */
static int probe_connected(struct ibv_probe *p)
{
	struct pollfd pf = {.fd = p->fd, .events = POLLOUT};
	int err = 0;
	socklen_t len = sizeof(err);

	if (poll(&pf, 1, 0) <= 0)
		return 0;
	if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
		return err ? -err : -EIO;
	p->connected = true;
	return 1;
}

int ibv_probe_step(struct ibv_probe *p, int64_t now_ms, char *what, size_t cap)
{
	bool ended = now_ms >= p->deadline_ms;
	int verdict;

	if (p->fd < 0)
		return IBV_PROBE_NONE;
	if (!p->connected) {
		int c = probe_connected(p);
		if (c < 0 || (c == 0 && ended)) {
			ibv_probe_close(p); /* refused, or no answer in time */
			return IBV_PROBE_NONE;
		}
		if (c == 0)
			return IBV_PROBE_WAIT;
	}
	while (p->got < sizeof(p->buf)) {
		ssize_t n = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, MSG_DONTWAIT);
		if (n > 0) {
			p->got += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			ended = true;
		break;
	}
	verdict = ibv_probe_judge(p->buf, p->got, ended, what, cap);
	if (verdict != IBV_PROBE_WAIT)
		ibv_probe_close(p);
	return verdict;
}
