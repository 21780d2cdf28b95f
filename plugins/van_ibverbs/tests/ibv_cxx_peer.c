/*
 * A stand-in for a C++ ps-lite node's RDMA van, as far as connecting goes: it
 * sends (connect) or answers (listen) rdmacm connection records of C++
 * ps-lite's layout (ibv_cxx.h), so that the VM suite can check what a pslite
 * node does when it meets one, without C++ ps-lite.
 *   ibv_cxx_peer listen HOST PORT SECONDS   accept every request for SECONDS
 *   ibv_cxx_peer connect HOST PORT TRIES    connect TRIES times, 300 ms apart
 * Prints one line per event ("accepted", "rejected", "established", ...).
 * Exit 0 unless something could not be set up.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "ibv_cxx.h"

static int resolve(const char *host, const char *port, struct sockaddr_storage *ss)
{
	struct addrinfo hints = {.ai_family = AF_INET}, *ai;
	if (getaddrinfo(host, port, &hints, &ai))
		return -1;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

/* The next event within ms, or NULL. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *e;
	if (poll(&p, 1, ms) <= 0 || rdma_get_cm_event(ch, &e))
		return NULL;
	return e;
}

static int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = {.qp_type = IBV_QPT_RC,
				     .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
					     .max_recv_sge = 1}};
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	if (!cq)
		return -1;
	a.send_cq = a.recv_cq = cq;
	return rdma_create_qp(id, NULL, &a);
}

static void conn_param(struct rdma_conn_param *cp, uint8_t *rec, uint32_t node, uint16_t port)
{
	struct ibv_cxx_conn c = {.node = node, .port = port};
	snprintf(c.host, sizeof(c.host), "cxx-peer");
	ibv_cxx_conn_encode(rec, &c);
	memset(cp, 0, sizeof(*cp));
	cp->private_data = rec;
	cp->private_data_len = IBV_CXX_REQ_LEN;
	cp->retry_count = 7;
	cp->rnr_retry_count = 7;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct sockaddr_storage ss;
	struct rdma_cm_event *e;
	struct rdma_conn_param cp;
	uint8_t rec[IBV_CXX_REQ_LEN];
	int n;

	if (argc != 5 || (strcmp(argv[1], "listen") && strcmp(argv[1], "connect"))) {
		fprintf(stderr, "usage: ibv_cxx_peer listen|connect HOST PORT SECONDS|TRIES\n");
		return 2;
	}
	n = atoi(argv[4]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!(ch = rdma_create_event_channel()) || resolve(argv[2], argv[3], &ss)) {
		fprintf(stderr, "ibv_cxx_peer: cannot set up rdmacm or resolve %s\n", argv[2]);
		return 1;
	}
	if (!strcmp(argv[1], "listen")) {
		struct rdma_cm_id *l;
		time_t end = time(NULL) + n;
		if (rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
		    rdma_bind_addr(l, (struct sockaddr *)&ss) || rdma_listen(l, 16)) {
			fprintf(stderr, "ibv_cxx_peer: cannot listen on %s:%s: %s\n", argv[2],
				argv[3], strerror(errno));
			return 1;
		}
		printf("listening\n");
		while (time(NULL) < end) {
			if (!(e = next_event(ch, 200)))
				continue;
			if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				conn_param(&cp, rec, 1, (uint16_t)atoi(argv[3]));
				if (make_qp(e->id) || rdma_accept(e->id, &cp))
					printf("accept failed: %s\n", strerror(errno));
				else
					printf("accepted\n");
			} else {
				printf("%s\n", rdma_event_str(e->event));
			}
			rdma_ack_cm_event(e);
		}
		return 0;
	}
	while (n-- > 0) {
		struct rdma_cm_id *id;
		int done = 0;
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, 2000)) {
			fprintf(stderr, "ibv_cxx_peer: rdma_resolve_addr: %s\n", strerror(errno));
			return 1;
		}
		while (!done && (e = next_event(ch, 5000))) {
			switch (e->event) {
			case RDMA_CM_EVENT_ADDR_RESOLVED:
				if (rdma_resolve_route(e->id, 2000))
					done = 1;
				break;
			case RDMA_CM_EVENT_ROUTE_RESOLVED:
				conn_param(&cp, rec, 32767, 0);
				if (make_qp(e->id) || rdma_connect(e->id, &cp))
					done = 1;
				break;
			default:
				printf("%s\n", e->event == RDMA_CM_EVENT_REJECTED
						       ? "rejected"
						       : rdma_event_str(e->event));
				done = 1;
				break;
			}
			rdma_ack_cm_event(e);
		}
		if (!done)
			printf("no answer\n");
		usleep(300000);
	}
	return 0;
}
