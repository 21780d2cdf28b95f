/* See freeport.h. */
#define _GNU_SOURCE 1
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "freeport.h"

/* Binds a TCP socket to host:port (0: the kernel's choice); the port bound,
 * or 0. */
static int try_bind(const char *host, int port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), got = 0;
	if (s < 0)
		return 0;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	if (!host || inet_pton(AF_INET, host, &a.sin_addr) != 1)
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(s, (struct sockaddr *)&a, &len) == 0)
		got = ntohs(a.sin_port);
	close(s);
	return got;
}

int psl_tool_free_port(const char *host)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int lo = 32768, hi = 60999, i, port;
	struct timespec ts;
	unsigned seed;

	if (f) {
		if (fscanf(f, "%d %d", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	seed = (unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec;
	/* up to 10000 ports under the ephemeral range, from 1024 up */
	if (lo > 1024 + 1000)
		for (i = 0; i < 200; i++) {
			int base = lo - 10000 > 1024 ? lo - 10000 : 1024;
			port = base + (int)(rand_r(&seed) % (unsigned)(lo - base));
			if (try_bind(host, port) == port)
				return port;
		}
	return try_bind(host, 0);
}
