/*
 * van_ibverbs connection management with rdmacm. Every connect() makes a link
 * of DMLC_SPLIT_QP_LAG reliable-connected queue pairs to the peer's host and
 * port (its rdmacm listener); the private data of each request names this
 * node, the link (a random nonce), the pair's index and its receive queue,
 * and the accept answers with the acceptor's receive queue. Links carry
 * messages one way; the reverse direction of each pair carries FIN and
 * CREDIT records. A refused or unreachable peer is retried until
 * PS_CONNECT_TIMEOUT; a link that goes down is reported once (PEER_DOWN).
 * A C++ ps-lite node is told by its record (ibv_cxx.h): its requests are
 * accepted with our C++ record, and a link whose accept is one connects again
 * with ours, one queue pair; those connections speak C++'s protocol
 * (ibv_cxxio.c).
 * Everything here runs under the van's lock, on the progress thread or in
 * connect()/disconnect().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ibv.h"
#include "ibv_cxx.h"

#define RESOLVE_MS 2000
/* How often a probe in flight is looked at (ibv_conn_timers). */
#define IBV_PROBE_POLL_MS 20

static int resolve(const char *host, int port, struct sockaddr_in *out)
{
	struct addrinfo hints, *res = NULL;
	int rc;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	rc = getaddrinfo(host && *host ? host : "0.0.0.0", NULL, &hints, &res);
	if (rc || !res)
		return -EHOSTUNREACH;
	memcpy(out, res->ai_addr, sizeof(*out));
	out->sin_port = htons((uint16_t)port);
	freeaddrinfo(res);
	return 0;
}

int ibv_listen(struct psl_van *v, const char *host, int port, int *bound)
{
	struct sockaddr_in sa;
	int rc;

	rc = resolve(host, port, &sa);
	if (rc) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot resolve the bind host '%s'", host);
		return rc;
	}
	if ((ntohl(sa.sin_addr.s_addr) >> 24) == 127) {
		/* a loopback address has no RDMA device behind it: listen on every
		 * address, peers given 127.x reach us through the device's own */
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		LOG(v, PSL_VAN_LOG_DEBUG, "bind host %s is loopback: listening on every address",
		    host);
	}
	if (rdma_create_id(v->ch, &v->listen, NULL, RDMA_PS_TCP))
		return -errno;
	if (rdma_bind_addr(v->listen, (struct sockaddr *)&sa)) {
		rc = -errno;
		LOG(v, PSL_VAN_LOG_ERROR,
		    "cannot bind an rdmacm listener to %s:%d: %s%s", host, port, strerror(-rc),
		    rc == -EADDRNOTAVAIL || rc == -ENODEV
			    ? " (is that address on an RDMA device? set DMLC_NODE_HOST or "
			      "DMLC_INTERFACE to the RDMA NIC's address)"
			    : "");
		goto fail;
	}
	if (rdma_listen(v->listen, 128)) {
		rc = -errno;
		LOG(v, PSL_VAN_LOG_ERROR, "rdma_listen on %s:%d: %s", host, port, strerror(-rc));
		goto fail;
	}
	if (v->listen->verbs) {
		rc = ibv_dev_attach(v, v->listen->verbs);
		if (rc)
			goto fail;
	}
	*bound = ntohs(rdma_get_src_port(v->listen));
	return 0;
fail:
	rdma_destroy_id(v->listen);
	v->listen = NULL;
	return rc;
}

static void q_unlink(struct psl_van *v, struct ibv_q *q)
{
	struct ibv_q **pp;
	for (pp = &v->qs; *pp; pp = &(*pp)->next_all)
		if (*pp == q) {
			*pp = q->next_all;
			break;
		}
}

void ibv_q_destroy(struct psl_van *v, struct ibv_q *q)
{
	int i;
	if (!q)
		return;
	ibv_q_fail(v, q, -ECONNRESET);
	q_unlink(v, q);
	if (q->link)
		for (i = 0; i < q->link->nqp; i++)
			if (q->link->q[i] == q)
				q->link->q[i] = NULL;
	if (q->stream)
		for (i = 0; i < q->stream->nqp; i++)
			if (q->stream->q[i] == q)
				q->stream->q[i] = NULL;
	if (q->qp)
		rdma_destroy_qp(q->cm);
	if (q->cq)
		ibv_destroy_cq(q->cq);
	ibv_q_teardown_bufs(q);
	if (q->cm)
		rdma_destroy_id(q->cm);
	free(q);
}

static struct ibv_q *q_new(struct psl_van *v)
{
	struct ibv_q *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->van = v;
	q->next_all = v->qs;
	v->qs = q;
	return q;
}

int ibv_link_start(struct psl_van *v, struct ibv_link *l)
{
	struct sockaddr_in dst, src;
	int i, rc;

	memset(&src, 0, sizeof(src));
	rc = resolve(l->host, l->port, &dst);
	if (rc) {
		snprintf(l->last_why, sizeof(l->last_why), "cannot resolve host '%s'", l->host);
		return rc;
	}
	if ((ntohl(dst.sin_addr.s_addr) >> 24) == 127) {
		uint32_t a = ibv_dev_local_ipv4();
		if (a)
			dst.sin_addr.s_addr = a; /* this machine, through its RDMA device */
	} else if (v->bound) {
		resolve(v->bind_host, 0, &src);
		if ((ntohl(src.sin_addr.s_addr) >> 24) == 127)
			src.sin_addr.s_addr = 0;
	}
	for (i = 0; i < l->nqp; i++) {
		struct ibv_q *q = q_new(v);
		if (!q)
			return -ENOMEM;
		q->outgoing = true;
		q->link = l;
		q->index = i;
		l->q[i] = q;
		if (rdma_create_id(v->ch, &q->cm, q, RDMA_PS_TCP)) {
			rc = -errno;
			q->cm = NULL;
			return rc;
		}
		if (rdma_resolve_addr(q->cm,
				      v->bound && src.sin_addr.s_addr ? (struct sockaddr *)&src
								      : NULL,
				      (struct sockaddr *)&dst, RESOLVE_MS)) {
			rc = -errno;
			snprintf(l->last_why, sizeof(l->last_why), "rdma_resolve_addr: %s",
				 strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static void link_reset_qs(struct psl_van *v, struct ibv_link *l)
{
	int i;
	for (i = 0; i < l->nqp; i++)
		if (l->q[i]) {
			struct ibv_q *q = l->q[i];
			q->link = NULL; /* its queued ops stay with the link */
			l->q[i] = NULL;
			ibv_q_destroy(v, q);
		}
}

static void link_retry(struct psl_van *v, struct ibv_link *l, int64_t now, const char *why)
{
	link_reset_qs(v, l);
	snprintf(l->last_why, sizeof(l->last_why), "%s", why);
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d at %s: %s; retrying in %d ms", l->id, l->where, why,
	    l->retry_ms);
	l->retry_at_ms = now + l->retry_ms;
	l->retry_ms = l->retry_ms * 2 > 1000 ? 1000 : l->retry_ms * 2;
}

static void tell(struct psl_van *v, int32_t id, int pev, int err, const char *detail)
{
	struct ibv_event *e = ibv_ev_new(v, 3);
	if (!e)
		return;
	e->id = id;
	e->pev = pev;
	e->status = err;
	snprintf(e->detail, sizeof(e->detail), "%s", detail ? detail : "");
}

/* The peer cannot be spoken to with these settings or this protocol: the link
 * stays down, its sends fail with err, the core is told once. */
static void link_mismatch(struct psl_van *v, struct ibv_link *l, int err, const char *detail)
{
	link_reset_qs(v, l);
	ibv_probe_close(&l->probe);
	l->state = L_DOWN;
	l->told = true;
	tell(v, l->id, PSL_VAN_PEER_MISMATCH, err, detail);
	while (l->live)
		ibv_sendop_finish(v, l->live, err);
}

/* rdmacm found no pslite listener at the peer's address: ask its TCP port
 * whether a node of another van is there (ibv_probe.h). A C++ ps-lite RDMA
 * node answers rdmacm, so its links are never probed. */
static void probe_begin(struct psl_van *v, struct ibv_link *l, int64_t now)
{
	int rc;

	if (l->cxx || l->retired || l->state != L_CONNECTING || l->probe.fd >= 0)
		return;
	rc = ibv_probe_start(&l->probe, l->host, l->port, now);
	if (rc)
		LOG(v, PSL_VAN_LOG_TRACE, "node %d at %s: no TCP probe: %s", l->id, l->where,
		    strerror(-rc));
}

/* Moves a link's probe on; a node of another van ends the link's tries. */
static void probe_poll(struct psl_van *v, struct ibv_link *l, int64_t now)
{
	char what[128], d[512];

	if (l->probe.fd < 0)
		return;
	if (l->state != L_CONNECTING || l->retired || l->cxx) {
		ibv_probe_close(&l->probe);
		return;
	}
	if (ibv_probe_step(&l->probe, now, what, sizeof(what)) != IBV_PROBE_OTHER)
		return;
	snprintf(d, sizeof(d),
		 "the node at %s does not run van_ibverbs: no rdmacm listener there, and %s "
		 "answers on its TCP port; give every node of the job the same "
		 "DMLC_ENABLE_RDMA", l->where, what);
	LOG(v, PSL_VAN_LOG_WARN, "node %d: %s", l->id, d);
	link_mismatch(v, l, -EPROTO, d);
}

void ibv_link_down(struct psl_van *v, struct ibv_link *l, int err, const char *detail)
{
	struct ibv_sendop *op;
	int i;

	if (l->state == L_DOWN)
		return;
	l->state = L_DOWN;
	ibv_probe_close(&l->probe);
	for (i = 0; i < l->nqp; i++)
		if (l->q[i]) {
			ibv_q_fail(v, l->q[i], err);
			if (l->q[i]->qp)
				rdma_disconnect(l->q[i]->cm);
		}
	while ((op = l->live))
		ibv_sendop_finish(v, op, err);
	l->wq_head = l->wq_tail = NULL;
	if (!l->retired && !l->told) {
		l->told = true;
		/* DEBUG only: the core says it (ERROR, "lost node ...") while
		 * the peer matters, and nothing once the job is ending, when
		 * every peer closes its connections */
		LOG(v, PSL_VAN_LOG_DEBUG, "node %d at %s: %s", l->id, l->where, detail);
		tell(v, l->id, PSL_VAN_PEER_DOWN, err, detail);
	}
}

void ibv_link_free(struct psl_van *v, struct ibv_link *l)
{
	struct ibv_sendop *op;
	int i;
	for (i = 0; i < l->nqp; i++)
		if (l->q[i])
			ibv_q_fail(v, l->q[i], -ECANCELED);
	while ((op = l->live))
		ibv_sendop_finish(v, op, -ECANCELED);
	l->wq_head = l->wq_tail = NULL;
	link_reset_qs(v, l);
	ibv_probe_close(&l->probe);
	ibv_cxx_link_free(l);
	free(l);
}

void ibv_stream_free(struct psl_van *v, struct ibv_stream *s)
{
	int i;
	ibv_stream_fail(v, s, -ECANCELED);
	for (i = 0; i < s->nqp; i++)
		if (s->q[i]) {
			struct ibv_q *q = s->q[i];
			s->q[i] = NULL;
			q->stream = NULL;
			ibv_q_destroy(v, q);
		}
	free(s);
}

static struct ibv_stream *stream_for(struct psl_van *v, const struct ibv_conn_req *r)
{
	struct ibv_stream *s;
	for (s = v->streams; s; s = s->next)
		if (s->nonce == r->nonce && !s->dead)
			return s->nqp == r->nqp && s->sender == r->sender ? s : NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->nonce = r->nonce;
	s->sender = r->sender;
	s->nqp = r->nqp;
	s->next = v->streams;
	v->streams = s;
	return s;
}

static void conn_params(struct psl_van *v, struct rdma_conn_param *cp, const void *pd,
			size_t pdlen)
{
	struct ibv_device_attr da;
	memset(cp, 0, sizeof(*cp));
	cp->private_data = pd;
	cp->private_data_len = (uint8_t)pdlen;
	cp->responder_resources = 16;
	cp->initiator_depth = 16;
	if (v->verbs && !ibv_query_device(v->verbs, &da)) {
		if (da.max_qp_rd_atom < cp->responder_resources)
			cp->responder_resources = (uint8_t)da.max_qp_rd_atom;
		if (da.max_qp_init_rd_atom < cp->initiator_depth)
			cp->initiator_depth = (uint8_t)da.max_qp_init_rd_atom;
	}
	cp->retry_count = 7;
	cp->rnr_retry_count = 7;
}

static void stream_q_gone(struct psl_van *v, struct ibv_q *q);

/* The one line for a C++ ps-lite peer in a job with PS_JOB_SECRET: C++ nodes
 * prove nothing, so the secret cannot be kept with them. */
static void cxx_peer_line(char *d, size_t n, const char *what, const char *where,
			  const struct ibv_cxx_conn *c)
{
	snprintf(d, n,
		 "%s%s%s node %u at %s port %u: it runs C++ ps-lite's RDMA van, which cannot "
		 "prove PS_JOB_SECRET; unset PS_JOB_SECRET on every node to mix C++ ps-lite "
		 "and pslite nodes (docs/van-ibverbs.md)",
		 what, where ? where : "", where ? " reached" : "", (unsigned)c->node, c->host,
		 (unsigned)c->port);
}

/* This node's record for C++ peers: its id (as last given to connect), its
 * listening port and host. */
static size_t cxx_record(struct psl_van *v, int32_t my_id, uint8_t *buf)
{
	struct ibv_cxx_conn c;
	const char *h = v->bind_host[0] ? v->bind_host : "localhost";
	memset(&c, 0, sizeof(c));
	c.node = (uint32_t)my_id;
	c.port = (uint16_t)v->port;
	/* cut to 15 characters as C++ does (it uses the name only to spot a
	 * peer on its own host) */
	memcpy(c.host, h, strnlen(h, IBV_CXX_HOST_LEN - 1));
	return ibv_cxx_conn_encode(buf, &c);
}

/* Whether this C++ peer is reported for the first time (remembers 16). */
static bool cxx_first(struct psl_van *v, const struct ibv_cxx_conn *c)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a over node, port, host */
	const char *p;
	int i;

	h = (h ^ c->node) * 1099511628211ull;
	h = (h ^ c->port) * 1099511628211ull;
	for (p = c->host; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	h |= 1;
	for (i = 0; i < 16; i++) {
		if (v->cxx_seen[i] == h)
			return false;
		if (!v->cxx_seen[i]) {
			v->cxx_seen[i] = h;
			return true;
		}
	}
	return false;
}

/* A C++ ps-lite node connects: its messages come on this queue pair, in
 * C++'s protocol (ibv_cxxio.c). */
static void accept_cxx(struct psl_van *v, struct rdma_cm_id *id, const struct ibv_cxx_conn *c)
{
	struct rdma_conn_param cp;
	uint8_t buf[IBV_CXX_REQ_LEN];
	struct ibv_stream *s;
	struct ibv_q *q = NULL;
	int rc;

	rc = ibv_dev_attach(v, id->verbs);
	s = rc ? NULL : calloc(1, sizeof(*s));
	if (s) {
		if (getrandom(&s->nonce, sizeof(s->nonce), 0) != sizeof(s->nonce))
			s->nonce = (uint64_t)psl_van_now_ns();
		s->sender = (int32_t)c->node;
		s->nqp = 1;
		s->cxx = true;
		s->next = v->streams;
		v->streams = s;
		q = q_new(v);
	}
	if (!q) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	q->cm = id;
	id->context = q;
	q->stream = s;
	q->cxx = true;
	q->nop_wr.kind = WR_NOP;
	s->q[0] = q;
	rc = ibv_q_setup(v, q, (uint32_t)v->rx_depth, IBV_CTL_BUF);
	if (!rc)
		rc = ibv_q_start(v, q, 65535, 0);
	if (rc) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot set up a queue pair for node %u (C++ ps-lite): %s",
		    (unsigned)c->node, strerror(-rc));
		rdma_reject(id, NULL, 0);
		stream_q_gone(v, q);
		return;
	}
	ibv_cxx_prepare(v);
	cxx_record(v, v->last_my_id ? v->last_my_id : PSL_VAN_ID_NONE, buf);
	conn_params(v, &cp, buf, sizeof(buf));
	if (rdma_accept(id, &cp)) {
		LOG(v, PSL_VAN_LOG_WARN, "rdma_accept for node %u: %s", (unsigned)c->node,
		    strerror(errno));
		stream_q_gone(v, q);
		return;
	}
	/* our links to it speak C++'s protocol from the start: a first
	 * connection in ours would cost the C++ node a whole endpoint */
	{
		char where[160];
		snprintf(where, sizeof(where), "%s:%u", c->host, (unsigned)c->port);
		ibv_cxx_remember(v, where);
	}
	LOG(v, PSL_VAN_LOG_DEBUG, "accepted node %u at %s port %u: a C++ ps-lite RDMA node, "
	    "spoken to in its protocol", (unsigned)c->node, c->host, (unsigned)c->port);
}

static void on_connect_request(struct psl_van *v, struct rdma_cm_id *id, const void *pd,
			       size_t pdlen)
{
	struct ibv_conn_req r;
	struct ibv_conn_acc a;
	struct rdma_conn_param cp;
	uint8_t buf[IBV_CONN_ACC_LEN];
	const char *why = "";
	struct ibv_stream *s;
	struct ibv_q *q;
	int rc;

	rc = ibv_conn_req_decode(pd, pdlen, &r, &why);
	if (rc) {
		uint8_t rej[IBV_CONN_REJ_LEN];
		struct ibv_cxx_conn c;
		const char *cwhy = "";
		if (!ibv_cxx_conn_decode(pd, pdlen, &c, &cwhy)) {
			if (v->secret) {
				char d[512];
				cxx_peer_line(d, sizeof(d), "refused an RDMA connection from", NULL,
					      &c);
				LOG(v, cxx_first(v, &c) ? PSL_VAN_LOG_ERROR : PSL_VAN_LOG_DEBUG,
				    "%s", d);
				ibv_conn_rej_encode(rej, IBV_REJ_NO_SECRET);
				rdma_reject(id, rej, sizeof(rej));
				rdma_destroy_id(id);
				return;
			}
			accept_cxx(v, id, &c);
			return;
		}
		LOG(v, PSL_VAN_LOG_WARN,
		    "refused an RDMA connection: %s (a node that does not run pslite's "
		    "van_ibverbs, or runs another version of it?)", why);
		ibv_conn_rej_encode(rej, rc == -EPROTONOSUPPORT ? IBV_REJ_VERSION
								: IBV_REJ_MALFORMED);
		rdma_reject(id, rej, sizeof(rej));
		rdma_destroy_id(id);
		return;
	}
	if (v->secret || (r.flags & IBV_REQ_F_PROOF)) {
		bool ok = v->secret && (r.flags & IBV_REQ_F_PROOF) &&
			  !psl_van_proof_check(v->host, "ibverbs", r.sender, r.proof) &&
			  psl_van_nonce_fresh(&v->nonces, r.proof);
		if (!ok) {
			uint8_t rej[IBV_CONN_REJ_LEN];
			LOG(v, PSL_VAN_LOG_WARN, "refused an RDMA connection (as node %d): %s",
			    r.sender,
			    v->secret ? "it proves no PS_JOB_SECRET this node has (a stranger, or "
					"a node with another secret or none)"
				      : "it proves a PS_JOB_SECRET and this node has none: give "
					"every node the same PS_JOB_SECRET");
			ibv_conn_rej_encode(rej, v->secret ? IBV_REJ_BAD_PROOF : IBV_REJ_NO_SECRET);
			rdma_reject(id, rej, sizeof(rej));
			rdma_destroy_id(id);
			return;
		}
	}
	rc = ibv_dev_attach(v, id->verbs);
	s = rc ? NULL : stream_for(v, &r);
	q = s && !s->q[r.qp_index] ? q_new(v) : NULL;
	if (!q) {
		uint8_t rej[IBV_CONN_REJ_LEN];
		ibv_conn_rej_encode(rej, IBV_REJ_RESOURCES);
		rdma_reject(id, rej, sizeof(rej));
		rdma_destroy_id(id);
		return;
	}
	q->cm = id;
	id->context = q;
	q->stream = s;
	q->index = r.qp_index;
	s->q[r.qp_index] = q;
	rc = ibv_q_setup(v, q, (uint32_t)v->rx_depth, IBV_EAGER_BUF);
	if (!rc)
		rc = ibv_q_start(v, q, r.rx_depth, r.rx_buf);
	if (rc) {
		uint8_t rej[IBV_CONN_REJ_LEN];
		/* Not an ERROR here: the connector is refused and tries again,
		 * and fails with an ERROR of its own if it never gets through.
		 * Seen once in a while in the soft-RoCE VM under load, with
		 * EINVAL from rdma_create_qp for a request the next try of
		 * which went through (ibv_vm.sh qps_per_peer). */
		LOG(v, PSL_VAN_LOG_WARN,
		    "cannot set up a queue pair for node %d: %s (refused; it will try again)",
		    r.sender, strerror(-rc));
		ibv_conn_rej_encode(rej, IBV_REJ_RESOURCES);
		rdma_reject(id, rej, sizeof(rej));
		ibv_q_destroy(v, q);
		return;
	}
	a.version = IBV_WIRE_VERSION;
	a.qp_index = r.qp_index;
	a.nqp = r.nqp;
	a.rx_depth = (uint32_t)v->rx_depth;
	a.rx_buf = IBV_EAGER_BUF;
	ibv_conn_acc_encode(buf, &a);
	conn_params(v, &cp, buf, sizeof(buf));
	if (rdma_accept(id, &cp)) {
		LOG(v, PSL_VAN_LOG_WARN, "rdma_accept for node %d: %s", r.sender,
		    strerror(errno));
		ibv_q_destroy(v, q);
		return;
	}
	LOG(v, PSL_VAN_LOG_DEBUG, "accepted queue pair %d/%d from node %d", r.qp_index + 1,
	    r.nqp, r.sender);
}

static void on_route_resolved(struct psl_van *v, struct ibv_q *q, int64_t now)
{
	struct ibv_link *l = q->link;
	struct ibv_conn_req r;
	struct rdma_conn_param cp;
	uint8_t buf[IBV_CONN_REQ_PROOF_LEN];
	size_t len;
	int rc;

	rc = ibv_dev_attach(v, q->cm->verbs);
	if (!rc)
		rc = ibv_q_setup(v, q, (uint32_t)v->rx_depth, IBV_CTL_BUF);
	if (rc) {
		char why[160];
		snprintf(why, sizeof(why), "cannot set up a queue pair: %s", strerror(-rc));
		link_retry(v, l, now, why);
		return;
	}
	if (l->cxx) {
		/* a C++ ps-lite node: its record, as it reads the sender's id */
		len = cxx_record(v, l->my_id, buf);
		q->cxx = true;
		q->nop_wr.kind = WR_NOP;
		conn_params(v, &cp, buf, len);
		if (rdma_connect(q->cm, &cp)) {
			char why[160];
			snprintf(why, sizeof(why), "rdma_connect: %s", strerror(errno));
			link_retry(v, l, now, why);
		}
		return;
	}
	r.version = IBV_WIRE_VERSION;
	r.qp_index = (uint8_t)q->index;
	r.nqp = (uint8_t)l->nqp;
	r.sender = l->my_id;
	r.rx_depth = (uint32_t)v->rx_depth;
	r.rx_buf = IBV_CTL_BUF;
	r.nonce = l->nonce;
	r.flags = 0;
	if (v->secret) {
		uint8_t mac[32];
		r.flags = IBV_REQ_F_PROOF;
		psl_van_put_le64(r.proof, l->nonce);
		if (getrandom(r.proof + 8, 8, 0) != 8 ||
		    psl__van_proof_mac(v->host, "ibverbs", l->my_id, r.proof, mac)) {
			link_retry(v, l, now, "cannot prove PS_JOB_SECRET (no randomness?)");
			return;
		}
		memcpy(r.proof + PSL_VAN_PROOF_NONCE_LEN, mac, PSL_VAN_PROOF_MAC_LEN);
	}
	len = ibv_conn_req_encode(buf, &r);
	conn_params(v, &cp, buf, len);
	if (rdma_connect(q->cm, &cp)) {
		char why[160];
		snprintf(why, sizeof(why), "rdma_connect: %s", strerror(errno));
		link_retry(v, l, now, why);
	}
}

static void on_established_out(struct psl_van *v, struct ibv_q *q, const void *pd, size_t pdlen,
			       int64_t now)
{
	struct ibv_link *l = q->link;
	struct ibv_conn_acc a;
	const char *why = "";
	int i, rc;

	rc = ibv_conn_acc_decode(pd, pdlen, &a, &why);
	if (rc || l->cxx) {
		struct ibv_cxx_conn c;
		const char *cwhy = "";
		if (!ibv_cxx_conn_decode(pd, pdlen, &c, &cwhy)) {
			if (v->secret) {
				char d[512];
				cxx_peer_line(d, sizeof(d), "the RDMA connection to ", l->where,
					      &c);
				link_mismatch(v, l, -EACCES, d);
				return;
			}
			if (!l->cxx) {
				/* it read our record as a node id: connect again
				 * with C++'s record, one queue pair */
				LOG(v, PSL_VAN_LOG_INFO,
				    "node %d at %s runs C++ ps-lite's RDMA van: speaking its "
				    "protocol to it", l->id, l->where);
				ibv_cxx_remember(v, l->where);
				l->cxx = true;
				link_reset_qs(v, l);
				l->nqp = 1;
				l->retry_at_ms = now;
				return;
			}
			rc = ibv_q_start(v, q, 65535, IBV_CXX_SLOT);
			if (rc) {
				char d[160];
				snprintf(d, sizeof(d), "cannot set up a queue pair: %s",
					 strerror(-rc));
				link_retry(v, l, now, d);
				return;
			}
			q->up = true;
			l->state = L_UP;
			LOG(v, PSL_VAN_LOG_DEBUG, "node %d at %s: up (C++ ps-lite's protocol)",
			    l->id, l->where);
			if (!l->retired)
				tell(v, l->id, PSL_VAN_PEER_UP, 0, NULL);
			ibv_link_flush_wait(v, l);
			ibv_cxx_pump(v, l);
			return;
		}
		if (l->cxx) {
			/* it answered as pslite now: start over in our protocol */
			l->cxx = false;
			rc = -EPROTO;
			why = "a pslite answer where a C++ ps-lite node was";
		}
	}
	if (!rc && (a.qp_index != q->index || a.nqp != l->nqp))
		rc = -EPROTO, why = "answer for another queue pair";
	if (!rc)
		rc = ibv_q_start(v, q, a.rx_depth, a.rx_buf);
	if (rc) {
		char d[512];
		snprintf(d, sizeof(d), "the node at %s answered the RDMA connection oddly: %s",
			 l->where, why);
		link_retry(v, l, now, d);
		return;
	}
	q->up = true;
	for (i = 0; i < l->nqp; i++)
		if (!l->q[i] || !l->q[i]->up)
			return;
	l->state = L_UP;
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d at %s: %d queue pair%s up", l->id, l->where, l->nqp,
	    l->nqp > 1 ? "s" : "");
	if (!l->retired)
		tell(v, l->id, PSL_VAN_PEER_UP, 0, NULL);
	ibv_link_flush_wait(v, l);
	for (i = 0; i < l->nqp; i++)
		ibv_q_kick(v, l->q[i]);
}

/* What an rdmacm event means for a connection, in words. */
static const char *event_why(int event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
		return "the address did not resolve to an RDMA device";
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return "no route to it over RDMA";
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return "the connection could not be set up";
	case RDMA_CM_EVENT_UNREACHABLE:
		return "it did not answer";
	case RDMA_CM_EVENT_REJECTED:
		return "it refused (nothing listening there yet?)";
	case RDMA_CM_EVENT_DISCONNECTED:
		return "disconnected";
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return "the RDMA device went away";
	default:
		return "unexpected connection event";
	}
}

static void out_failed(struct psl_van *v, struct ibv_q *q, int event, int status,
		       const void *pd, size_t pdlen, int64_t now)
{
	struct ibv_link *l = q->link;
	char why[512];
	int reason = event == RDMA_CM_EVENT_REJECTED ? ibv_conn_rej_decode(pd, pdlen) : -1;

	if (l->state != L_CONNECTING) {
		snprintf(why, sizeof(why), "RDMA connection to %s lost (%s)", l->where,
			 event_why(event));
		ibv_link_down(v, l, -ECONNRESET, why);
		return;
	}
	if (reason == IBV_REJ_BAD_PROOF || reason == IBV_REJ_NO_SECRET) {
		snprintf(why, sizeof(why), "the node at %s refused this node's RDMA connection: %s",
			 l->where,
			 reason == IBV_REJ_BAD_PROOF
				 ? "it has a PS_JOB_SECRET and this node proves another or none: "
				   "give every node of the job the same PS_JOB_SECRET"
				 : "this node has a PS_JOB_SECRET and that node has none: give "
				   "every node of the job the same PS_JOB_SECRET");
		link_mismatch(v, l, -EACCES, why);
		return;
	}
	if (reason == IBV_REJ_VERSION || reason == IBV_REJ_MALFORMED) {
		snprintf(why, sizeof(why),
			 "the node at %s runs van_ibverbs with another wire version: use the "
			 "same pslite on every node", l->where);
		link_mismatch(v, l, -EPROTO, why);
		return;
	}
	if (reason == IBV_REJ_RESOURCES)
		snprintf(why, sizeof(why),
			 "it refused: it could not set up a queue pair for this connection "
			 "(its log says why)");
	else
		snprintf(why, sizeof(why), "%s (status %d)", event_why(event), status);
	link_retry(v, l, now, why);
	if (reason != IBV_REJ_RESOURCES)
		probe_begin(v, l, now);
}

static void stream_q_gone(struct psl_van *v, struct ibv_q *q)
{
	struct ibv_stream *s = q->stream, **pp;
	int i;
	if (s) {
		ibv_stream_fail(v, s, -ECONNRESET);
		s->dead = true;
	}
	ibv_q_destroy(v, q);
	if (!s)
		return;
	for (i = 0; i < s->nqp; i++)
		if (s->q[i])
			return;
	for (pp = &v->streams; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	ibv_stream_free(v, s);
}

void ibv_cm_event(struct psl_van *v)
{
	struct rdma_cm_event *ev;
	int64_t now = psl_van_now_ms();

	while (rdma_get_cm_event(v->ch, &ev) == 0) {
		struct rdma_cm_id *id = ev->id;
		int type = ev->event, status = ev->status;
		uint8_t pd[256];
		size_t pdlen = ev->param.conn.private_data_len;
		struct ibv_q *q = id ? id->context : NULL;

		if (pdlen > sizeof(pd))
			pdlen = sizeof(pd);
		if (pdlen && ev->param.conn.private_data)
			memcpy(pd, ev->param.conn.private_data, pdlen);
		else
			pdlen = 0;
		rdma_ack_cm_event(ev);
		LOG(v, PSL_VAN_LOG_TRACE, "rdmacm: %s (status %d)",
		    rdma_event_str((enum rdma_cm_event_type)type), status);
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			on_connect_request(v, id, pd, pdlen);
			continue;
		}
		if (!q)
			continue;
		if (q->outgoing && !q->link) {
			/* a queue pair of a link that gave up on it */
			continue;
		}
		switch (type) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(id, RESOLVE_MS))
				out_failed(v, q, type, -errno, NULL, 0, now);
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			on_route_resolved(v, q, now);
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (q->outgoing) {
				on_established_out(v, q, pd, pdlen, now);
			} else {
				q->up = true;
				ibv_q_kick(v, q); /* FINs and credits owed already */
			}
			break;
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (q->outgoing)
				out_failed(v, q, type, status, pd, pdlen, now);
			else
				stream_q_gone(v, q);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			/* take what already arrived before the pair goes */
			ibv_poll_all(v);
			if (q->outgoing) {
				struct ibv_link *l = q->link;
				if (l->state == L_UP || l->state == L_CONNECTING) {
					char why[512];
					snprintf(why, sizeof(why),
						 "the RDMA connection to %s was closed by the peer "
						 "(its process ended?)", l->where);
					ibv_link_down(v, l, -ECONNRESET, why);
				}
				l->q[q->index] = NULL;
				ibv_q_destroy(v, q);
			} else {
				stream_q_gone(v, q);
			}
			break;
		default:
			break;
		}
	}
}

/* Retries, timeouts and retired links; returns ms until the next timer. */
int ibv_conn_timers(struct psl_van *v, int64_t now)
{
	struct ibv_link *l, **pp;
	int64_t next = now + 1000;

	for (pp = &v->links; (l = *pp);) {
		int i, nq = 0;
		for (i = 0; i < l->nqp; i++)
			nq += l->q[i] != NULL;
		if (l->retired && !l->live) {
			/* replaced or disconnected, and nothing of it in flight: its
			 * queue pairs go (the peer sees them disconnect) */
			*pp = l->next;
			ibv_link_free(v, l);
			continue;
		}
		if (l->state == L_CONNECTING && nq == 0) {
			if (now >= l->deadline_ms) {
				char d[768];
				snprintf(d, sizeof(d),
					 "cannot reach %s over RDMA within PS_CONNECT_TIMEOUT "
					 "(%s): is the node running with DMLC_ENABLE_RDMA=ibverbs, "
					 "and is the address on an RDMA device?",
					 l->where, l->last_why);
				ibv_link_down(v, l, -EHOSTUNREACH, d);
			} else if (now >= l->retry_at_ms) {
				int rc = ibv_link_start(v, l);
				if (rc) {
					char why[256];
					snprintf(why, sizeof(why), "%s", l->last_why);
					link_retry(v, l, now, why);
					probe_begin(v, l, now);
				}
			}
			if (l->state == L_CONNECTING && l->retry_at_ms < next && nq == 0)
				next = l->retry_at_ms > now ? l->retry_at_ms : now + 1;
		}
		probe_poll(v, l, now);
		if (l->probe.fd >= 0 && now + IBV_PROBE_POLL_MS < next)
			next = now + IBV_PROBE_POLL_MS;
		pp = &l->next;
	}
	return next <= now ? 1 : (int)(next - now);
}
