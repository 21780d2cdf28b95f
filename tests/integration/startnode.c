/*
 * startnode: the smallest pslite program, for the bad-input tests.
 *
 *   startnode             psl_start(0, true) with the environment as it is,
 *                         then psl_finalize; exit 0, or 3 if psl_start failed
 *                         (saying so on one line that is not an ERROR line:
 *                         the library prints the one ERROR line)
 *   startnode --listen    listen on a free TCP port of 127.0.0.1 (accepting
 *                         and saying nothing), print the port, and stay
 *                         until killed or 60 s pass
 *   startnode --free-port print a TCP port of 127.0.0.1 that is free now
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <pslite.h>

#include "freeport.h"

static int listen_any(int *port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 16) ||
	    getsockname(s, (struct sockaddr *)&a, &len)) {
		close(s);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return s;
}

int main(int argc, char **argv)
{
	int rc;
	if (argc > 1 && !strcmp(argv[1], "--free-port")) {
		int port = psl_tool_free_port("127.0.0.1");
		if (!port)
			return 1;
		printf("%d\n", port);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--listen")) {
		int port, s = listen_any(&port);
		time_t t0 = time(NULL);
		if (s < 0) {
			perror("startnode --listen");
			return 1;
		}
		printf("%d\n", port);
		fflush(stdout);
		while (time(NULL) - t0 < 60) {
			struct pollfd p[1] = {{s, POLLIN, 0}};
			if (poll(p, 1, 1000) < 0)
				break;
			if (p[0].revents & POLLIN) {
				int c = accept(s, NULL, NULL);
				(void)c; /* held open, never answered */
			}
		}
		return 0;
	}
	rc = psl_start(0, true);
	if (rc) {
		fprintf(stderr, "startnode: psl_start returned %d (%s)\n", rc, psl_strerror(rc));
		psl_finalize(0, false);
		return 3;
	}
	rc = psl_finalize(0, true);
	return rc ? 4 : 0;
}
