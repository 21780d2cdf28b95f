/* van_fabric: plain TCP helpers for the bootstrap connections. */

#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fabric.h"

/* A numeric IPv4 address for host, or host itself when it does not resolve. */
void fab_numeric_host(const char *host, char *out, size_t len)
{
	struct in_addr a;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	if (inet_pton(AF_INET, host, &a) == 1 || getaddrinfo(host, NULL, &hints, &res) != 0) {
		snprintf(out, len, "%s", host);
		return;
	}
	inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, (socklen_t)len);
	freeaddrinfo(res);
}

static int sockaddr_of(const char *host, int port, struct sockaddr_in *sa)
{
	char num[64];
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	fab_numeric_host(host, num, sizeof(num));
	if (!strcmp(num, "*") || !strcmp(num, "0.0.0.0")) {
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
		return 0;
	}
	return inet_pton(AF_INET, num, &sa->sin_addr) == 1 ? 0 : -EADDRNOTAVAIL;
}

/* A non-blocking TCP socket for host:port (in *sa): the fd or -errno. */
static int tcp_socket(const char *host, int port, struct sockaddr_in *sa)
{
	int rc = sockaddr_of(host, port, sa), s;
	if (rc)
		return rc;
	s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	return s < 0 ? -errno : s;
}

int fab_tcp_listen(const char *host, int port, int *fd, int *bound_port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int s = tcp_socket(host, port, &sa), one = 1, rc;

	if (s < 0)
		return s;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 512) != 0 ||
	    getsockname(s, (struct sockaddr *)&sa, &len) != 0) {
		rc = -errno;
		close(s);
		return rc;
	}
	*fd = s;
	*bound_port = ntohs(sa.sin_port);
	return 0;
}

int fab_tcp_connect(const char *host, int port, int *fd)
{
	struct sockaddr_in sa;
	int s = tcp_socket(host, port, &sa), one = 1, rc;

	if (s < 0)
		return s;
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
		rc = -errno;
		close(s);
		return rc;
	}
	*fd = s;
	return 0;
}

/* Small writes on a fresh connection: the socket buffer takes them whole. */
int fab_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	int tries = 0;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN && ++tries < 1000) {
			usleep(100);
		} else {
			return n < 0 ? -errno : -EIO;
		}
	}
	return 0;
}

/* A dead host (not just a dead process) shows within about half a minute. */
void fab_keepalive(int fd)
{
	int one = 1, idle = 10, intvl = 5, cnt = 3;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

void fab_sockname(int fd, bool peer, char *out, size_t len)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char ip[INET_ADDRSTRLEN] = "?";
	int rc = peer ? getpeername(fd, (struct sockaddr *)&sa, &sl)
		      : getsockname(fd, (struct sockaddr *)&sa, &sl);
	if (rc == 0 && sa.sin_family == AF_INET) {
		inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
		snprintf(out, len, "%s:%d", ip, ntohs(sa.sin_port));
	} else {
		snprintf(out, len, "?");
	}
}
