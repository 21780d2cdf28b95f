/*
 * A stand-in for a C++ ps-lite node's RDMA van: it sends (connect) or answers
 * (listen) rdmacm connection records of C++ ps-lite's layout and then plays
 * its rendezvous (ibv_cxx.h), so that the VM suite can check van_ibverbs's C++
 * mode without C++ ps-lite:
 *   ibv_cxx_peer listen HOST PORT SECONDS
 *       accept every request for SECONDS; answer each rendezvous START with a
 *       REPLY naming a buffer registered for remote writes, and print what
 *       the WRITE_WITH_IMM that follows put there ("message: ... cmd 2 ...")
 *   ibv_cxx_peer connect HOST PORT TRIES
 *       connect TRIES times, 300 ms apart, as node 32767; on each connection
 *       that is accepted, send a BOOTSTRAP control message the way C++ does
 *       (START, wait for the REPLY with our cookie, WRITE_WITH_IMM the meta)
 * Prints one line per event ("accepted", "rejected", "established",
 * "reply: ...", "wrote", ...). Exit 0 unless something could not be set up.
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

#include <pslite/van_util.h>

#include "ibv_cxx.h"

#define NRX 8
#define BUF (64 * 1024)

/* One connection's verbs resources. */
struct conn {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *mem; /* NRX receive buffers of 64 bytes, a send slot, BUF to write into */
};

static uint8_t *rxb(struct conn *c, int i)
{
	return c->mem + 64 * i;
}

static uint8_t *txb(struct conn *c)
{
	return c->mem + 64 * NRX;
}

static uint8_t *bigb(struct conn *c)
{
	return c->mem + 4096;
}

static int post_rx(struct conn *c, int i)
{
	struct ibv_sge sge = {.addr = (uintptr_t)rxb(c, i), .length = 64, .lkey = c->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(c->id->qp, &wr, &bad);
}

static int post(struct conn *c, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t imm,
		uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = c->mr->lkey};
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1000;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = imm; /* as C++ does: the number as it is */
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(c->id->qp, &wr, &bad);
}

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

static int make_qp(struct rdma_cm_id *id, struct conn *c)
{
	struct ibv_qp_init_attr a = {.qp_type = IBV_QPT_RC,
				     .cap = {.max_send_wr = 16, .max_recv_wr = NRX, .max_send_sge = 1,
					     .max_recv_sge = 1}};
	int i;
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->cq = ibv_create_cq(id->verbs, 64, NULL, NULL, 0);
	if (!c->cq)
		return -1;
	a.send_cq = a.recv_cq = c->cq;
	if (rdma_create_qp(id, NULL, &a))
		return -1;
	if (posix_memalign((void **)&c->mem, 4096, 4096 + BUF))
		return -1;
	memset(c->mem, 0, 4096 + BUF);
	c->mr = ibv_reg_mr(id->qp->pd, c->mem, 4096 + BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c->mr)
		return -1;
	for (i = 0; i < NRX; i++)
		if (post_rx(c, i))
			return -1;
	return 0;
}

/* What a ps-lite meta says, in one line (docs/wire.md §4). */
static void show_meta(const uint8_t *m, size_t len)
{
	int32_t body, nt, ns;
	size_t node;
	if (len < 112) {
		printf("message: %zu bytes, too short for a meta\n", len);
		return;
	}
	body = (int32_t)psl_van_get_le32(m + 4);
	nt = (int32_t)psl_van_get_le32(m + 44);
	ns = (int32_t)psl_van_get_le32(m + 12);
	node = 112 + (size_t)body + 4 * (size_t)nt;
	printf("message: %zu bytes, cmd %u, node_size %d", len, psl_van_get_le32(m + 8), ns);
	if (ns > 0 && node + 552 <= len)
		printf(", role %d, id %d, host %.63s", (int)psl_van_get_le32(m + node),
		       (int)psl_van_get_le32(m + node + 4), (const char *)m + node + 8);
	printf("\n");
}

/* Serves one connection's completions (listen side). */
static void serve(struct conn *c, uint32_t idx)
{
	struct ibv_wc wc[8];
	int n, i;
	while ((n = ibv_poll_cq(c->cq, 8, wc)) > 0)
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				printf("completion error: %s\n", ibv_wc_status_str(wc[i].status));
				continue;
			}
			if (wc[i].opcode == IBV_WC_RECV && wc[i].imm_data == IBV_CXX_IMM_START) {
				struct ibv_cxx_start st;
				struct ibv_cxx_reply r;
				const char *why = "";
				if (ibv_cxx_start_decode(rxb(c, (int)wc[i].wr_id), wc[i].byte_len, &st,
							 &why) || ibv_cxx_buf_len(&st) > BUF) {
					printf("bad start: %s\n", why);
				} else {
					printf("start: meta %llu bytes, %llu segments\n",
					       (unsigned long long)st.meta_len,
					       (unsigned long long)st.nseg);
					r.addr = (uintptr_t)bigb(c);
					r.cookie = st.cookie;
					r.rkey = c->mr->rkey;
					r.idx = idx;
					/* the meta length, for the message that follows */
					psl_van_put_le64(txb(c) + 32, st.meta_len);
					ibv_cxx_reply_encode(txb(c), &r);
					if (post(c, IBV_WR_SEND_WITH_IMM, txb(c), IBV_CXX_REPLY_LEN,
						 IBV_CXX_IMM_REPLY, 0, 0))
						printf("reply failed\n");
				}
			} else if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
				if (wc[i].imm_data != idx)
					printf("message at index %u, not ours (%u)\n", wc[i].imm_data,
					       idx);
				else
					show_meta(bigb(c), (size_t)psl_van_get_le64(txb(c) + 32));
			} else if (wc[i].opcode & IBV_WC_RECV) {
				printf("unexpected record (immediate %u)\n", wc[i].imm_data);
			}
			if (wc[i].opcode & IBV_WC_RECV)
				post_rx(c, (int)wc[i].wr_id);
		}
}

/* Sends a BOOTSTRAP control message as C++ does (connect side). */
static void bootstrap(struct conn *c)
{
	uint8_t *m = bigb(c);
	struct ibv_cxx_start st = {.meta_len = 112, .nseg = 0, .cookie = 0xc0ffee};
	struct ibv_cxx_reply r;
	struct ibv_wc wc;
	const char *why = "";
	int waited = 0, got = 0;

	memset(m, 0, 112);
	psl_van_put_le32(m, 32767);	 /* head */
	psl_van_put_le32(m + 8, 6);	 /* cmd BOOTSTRAP */
	m[32] = 1;			 /* request */
	psl_van_put_le32(m + 36, 32767); /* app_id */
	psl_van_put_le32(m + 52, (uint32_t)-1);
	psl_van_put_le32(m + 60, (uint32_t)-1);
	psl_van_put_le32(m + 64, 32767); /* customer_id */
	ibv_cxx_start_encode(txb(c), &st);
	if (post(c, IBV_WR_SEND_WITH_IMM, txb(c), IBV_CXX_START_LEN, IBV_CXX_IMM_START, 0, 0)) {
		printf("start failed\n");
		return;
	}
	while (!got && waited < 10000) {
		int n = ibv_poll_cq(c->cq, 1, &wc);
		if (n <= 0) {
			usleep(1000);
			waited++;
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			printf("completion error: %s\n", ibv_wc_status_str(wc.status));
			return;
		}
		if (wc.opcode != IBV_WC_RECV)
			continue;
		if (wc.imm_data != IBV_CXX_IMM_REPLY ||
		    ibv_cxx_reply_decode(rxb(c, (int)wc.wr_id), wc.byte_len, 0, &r, &why)) {
			printf("bad reply (immediate %u): %s\n", wc.imm_data, why);
			return;
		}
		got = 1;
	}
	if (!got) {
		printf("no reply\n");
		return;
	}
	printf("reply: cookie %s, index %u\n", r.cookie == 0xc0ffee ? "ours" : "wrong", r.idx);
	if (post(c, IBV_WR_RDMA_WRITE_WITH_IMM, m, 112, r.idx, r.addr, r.rkey)) {
		printf("write failed\n");
		return;
	}
	for (waited = 0; waited < 10000; waited++) {
		if (ibv_poll_cq(c->cq, 1, &wc) > 0 && wc.opcode == IBV_WC_RDMA_WRITE) {
			printf(wc.status == IBV_WC_SUCCESS ? "wrote\n" : "write error\n");
			return;
		}
		usleep(1000);
	}
	printf("write not completed\n");
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
	static struct conn conns[16], out;
	int n, nconn = 0;

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
			int i;
			for (i = 0; i < nconn; i++)
				serve(&conns[i], (uint32_t)i + 5);
			if (!(e = next_event(ch, 20)))
				continue;
			if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST && nconn < 16) {
				struct ibv_cxx_conn cc;
				const char *why = "";
				conn_param(&cp, rec, 1, (uint16_t)atoi(argv[3]));
				if (make_qp(e->id, &conns[nconn]) || rdma_accept(e->id, &cp)) {
					printf("accept failed: %s\n", strerror(errno));
				} else if (ibv_cxx_conn_decode(e->param.conn.private_data,
							       e->param.conn.private_data_len, &cc,
							       &why)) {
					printf("accepted a record that is not C++'s (%s)\n", why);
					nconn++;
				} else {
					printf("accepted node %u\n", cc.node);
					nconn++;
				}
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
				if (make_qp(e->id, &out) || rdma_connect(e->id, &cp))
					done = 1;
				break;
			case RDMA_CM_EVENT_ESTABLISHED:
				printf("established\n");
				bootstrap(&out);
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
