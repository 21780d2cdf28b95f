/*
 * van_ucx: outbound connections. connect() makes one; the thread that owns
 * the worker then drives it: TCP connect with retries, greeting and hello,
 * the welcome with the peer's UCX worker address, the UCP endpoint, and its
 * end (the peer went away, the connection was replaced, fini). Timers of
 * both directions run from psl__ucx_boot_tick.
 */

#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "ucx_van.h"

struct ucx_out *psl__ucx_out_new(struct psl_van *v, const struct psl_van_peer *peer,
				 int32_t my_id, int *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	struct ucx_out *o;
	char pstr[16];
	int rc;

	snprintf(pstr, sizeof(pstr), "%d", peer->port);
	rc = getaddrinfo(peer->host, pstr, &hints, &res);
	if (rc || !res) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot resolve %s (node %d): %s", peer->host, peer->id,
		    rc ? gai_strerror(rc) : "no address");
		*err = -EHOSTUNREACH;
		return NULL;
	}
	o = calloc(1, sizeof(*o));
	if (!o || res->ai_addrlen > sizeof(o->sa)) {
		freeaddrinfo(res);
		free(o);
		*err = -ENOMEM;
		return NULL;
	}
	o->fdh.kind = FD_OUT;
	o->v = v;
	o->id = peer->id;
	o->my_id = my_id;
	memcpy(&o->sa, res->ai_addr, res->ai_addrlen);
	o->salen = res->ai_addrlen;
	freeaddrinfo(res);
	psl__ucx_sockaddr_desc((struct sockaddr *)&o->sa, o->where, sizeof(o->where));
	snprintf(o->desc, sizeof(o->desc), "node %d at %s", o->id, o->where);
	o->fd = -1;
	o->state = OUT_IDLE;
	o->t_first = o->t_retry = psl_van_now_ms();
	o->q_tail = &o->q_head;
	pthread_mutex_init(&o->mu, NULL);
	atomic_init(&o->ep_error, false);
	return o;
}

static void out_close_fd(struct ucx_out *o)
{
	if (o->fd >= 0) {
		epoll_ctl(o->v->epfd, EPOLL_CTL_DEL, o->fd, NULL);
		close(o->fd);
		o->fd = -1;
	}
	o->rxlen = 0;
	o->greeted = false;
}

void psl__ucx_out_free(struct ucx_out *o)
{
	out_close_fd(o);
	free(o->rx);
	pthread_mutex_destroy(&o->mu);
	free(o);
}


/* Closes the endpoint with the given ucp_ep_close_nbx mode; the request is
 * kept in o->close_req until done. */
static void ep_close(struct ucx_out *o, ucp_ep_h ep, bool force)
{
	ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
				   .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
	ucs_status_ptr_t req;

	req = ucp_ep_close_nbx(ep, &prm);
	o->closing = true;
	if (UCS_PTR_IS_PTR(req))
		o->close_req = req;
}

/* Fails every send waiting for the endpoint. */
static void fail_queue(struct ucx_send *q, int err)
{
	while (q) {
		struct ucx_send *n = q->next;
		psl__ucx_send_put(q, err);
		q = n;
	}
}

void psl__ucx_out_fail(struct ucx_out *o, int event, int err, const char *detail)
{
	struct psl_van *v = o->v;
	struct ucx_send *q;
	ucp_ep_h ep;
	bool tell;

	pthread_mutex_lock(&o->mu);
	if (o->state == OUT_FAILED) {
		pthread_mutex_unlock(&o->mu);
		return;
	}
	o->state = OUT_FAILED;
	o->err = err;
	q = o->q_head;
	o->q_head = NULL;
	o->q_tail = &o->q_head;
	o->qlen = 0;
	ep = o->ep;
	o->ep = NULL;
	tell = !o->retired && !v->stopping;
	pthread_mutex_unlock(&o->mu);
	out_close_fd(o);
	if (ep)
		ep_close(o, ep, true); /* cancels what is still in flight */
	fail_queue(q, err);
	psl__ucx_fail_posted(v, o, err); /* what the close did not cancel */
	if (tell) {
		LOG(v, PSL_VAN_LOG_DEBUG, "%s: %s", o->desc, detail); /* the core says more */
		v->host->peer_event(v->host->ctx, o->id, event, err, detail);
	}
	atomic_store(&v->boot_dirty, true);
}

/* A TCP connect or handshake failed before the endpoint was up: retry,
 * until PS_CONNECT_TIMEOUT (plus a little, so that the core's clearer
 * message for the scheduler comes first). */
static void out_retry(struct ucx_out *o, const char *why)
{
	struct psl_van *v = o->v;
	int64_t now = psl_van_now_ms();
	int delay = 50 << (o->tries < 5 ? o->tries : 5);

	out_close_fd(o);
	if (o->retired && atomic_load(&o->posted) == 0) { /* nobody waits for it */
		pthread_mutex_lock(&o->mu);
		o->state = OUT_FAILED;
		pthread_mutex_unlock(&o->mu);
		return;
	}
	if (now - o->t_first >= v->connect_ms + 5000) {
		char d[320];
		snprintf(d, sizeof(d),
			 "cannot reach %s within %d s (PS_CONNECT_TIMEOUT): %s", o->where,
			 v->connect_ms / 1000, why);
		psl__ucx_out_fail(o, PSL_VAN_PEER_DOWN, -ETIMEDOUT, d);
		return;
	}
	if (delay > 1000)
		delay = 1000;
	o->tries++;
	if (o->tries <= 3 || o->tries % 20 == 0)
		LOG(v, PSL_VAN_LOG_DEBUG, "%s: %s; retrying in %d ms", o->desc, why, delay);
	pthread_mutex_lock(&o->mu);
	o->state = OUT_IDLE;
	pthread_mutex_unlock(&o->mu);
	o->t_retry = now + delay;
	psl__ucx_schedule(v, o->t_retry);
}

static void out_start(struct ucx_out *o)
{
	struct psl_van *v = o->v;
	struct ucxp_hello h = {.version = UCXP_PROTO_VERSION,
			       .flags = v->secret ? UCXP_HELLO_F_PROOF : 0,
			       .node_id = o->my_id,
			       .ucx_version = v->ucx_version};
	uint8_t proof[PSL_VAN_PROOF_LEN];
	int fd, rc;

	if (v->secret && (rc = psl_van_proof_make(v->host, UCXP_VAN_NAME, o->my_id, proof))) {
		psl__ucx_out_fail(o, PSL_VAN_PEER_MISMATCH, rc,
				  "cannot prove PS_JOB_SECRET on a connection (no randomness?)");
		return;
	}

	fd = socket(o->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		out_retry(o, strerror(errno));
		return;
	}
	psl__ucx_tune_socket(fd);
	o->fd = fd;
	o->txlen = psl__ucxp_greeting((char *)o->tx, sizeof(o->tx));
	psl__ucxp_hello_encode(&h, o->tx + o->txlen);
	o->txlen += UCXP_HELLO_SIZE;
	if (v->secret) {
		memcpy(o->tx + o->txlen, proof, sizeof(proof));
		o->txlen += sizeof(proof);
	}
	o->txoff = 0;
	o->rxlen = 0;
	o->greeted = false;
	rc = connect(fd, (struct sockaddr *)&o->sa, o->salen);
	if (rc && errno != EINPROGRESS) {
		out_retry(o, strerror(errno));
		return;
	}
	pthread_mutex_lock(&o->mu);
	o->state = OUT_CONNECTING;
	pthread_mutex_unlock(&o->mu);
	o->t_deadline = psl_van_now_ms() + v->handshake_ms;
	psl__ucx_schedule(v, o->t_deadline);
	if (psl__ucx_ep_ctl(v, EPOLL_CTL_ADD, fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, o) != 0)
		out_retry(o, "epoll_ctl failed");
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t st)
{
	struct ucx_out *o = arg;
	(void)ep;
	(void)st;
	atomic_store(&o->ep_error, true);
	atomic_fetch_add(&o->v->ep_errors, 1);
}

static ucs_status_t ep_create(struct ucx_out *o, const void *addr, int mode, ucp_ep_h *ep)
{
	ucp_ep_params_t p;
	ucs_status_t st;

	memset(&p, 0, sizeof(p));
	p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
	p.address = addr;
	p.err_mode = mode;
	if (mode == UCP_ERR_HANDLING_MODE_PEER) {
		p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
		p.err_handler.cb = ep_err_cb;
		p.err_handler.arg = o;
	}
	st = ucp_ep_create(o->v->worker, &p, ep);
	return st;
}

/* Which transport carries the endpoint's active messages: batches and
 * joined parts go over tcp only (ucx_proto.h, psl__ucxp_am_lane). */
static void am_lane(struct ucx_out *o, ucp_ep_h ep)
{
	struct psl_van *v = o->v;
	char *text = NULL, lane[64] = "";
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (f) {
		ucp_ep_print_info(ep, f);
		fclose(f);
	}
	o->am_tcp = text && !psl__ucxp_am_lane(text, lane, sizeof(lane)) &&
		    !strncmp(lane, "tcp/", 4);
	free(text);
	LOG(v, PSL_VAN_LOG_DEBUG, "%s: active messages over %s%s", o->desc,
	    lane[0] ? lane : "(a transport UCX did not name)",
	    o->am_tcp && v->batch_max ? ", in batches" : "");
}

/* The welcome came: create the endpoint and send what waited for it. */
static void out_established(struct ucx_out *o, const struct ucxp_welcome *w, const void *addr)
{
	struct psl_van *v = o->v;
	struct ucx_send *q, *failed = NULL, **ftail = &failed;
	ucs_status_t st = UCS_ERR_UNREACHABLE;
	ucp_ep_h ep = NULL;
	bool tell;

	if (w->ucx_version != v->ucx_version)
		LOG(v, PSL_VAN_LOG_WARN, "%s runs UCX %u.%u, this node %s", o->desc,
		    w->ucx_version >> UCP_VERSION_MAJOR_SHIFT,
		    (w->ucx_version >> UCP_VERSION_MINOR_SHIFT) & 0xff, v->ucx_version_str);
	st = ep_create(o, addr,
		       v->peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
		       &ep);
	if (st != UCS_OK) {
		char d[640];
		snprintf(d, sizeof(d),
			 "%s answered as van ucx, but UCX finds no transport to reach it from "
			 "here (%s; transports here: %s): give every node the same UCX_TLS%s",
			 o->where, ucs_status_string(st), v->transports,
			 v->peer_errors ? " (PS_UCX_ERR_MODE=peer needs a transport that "
					  "detects peer failure: unset it for shared memory)"
					: "");
		psl__ucx_out_fail(o, PSL_VAN_PEER_MISMATCH, -EHOSTUNREACH, d);
		return;
	}
	am_lane(o, ep);
	pthread_mutex_lock(&o->mu);
	o->ep = ep;
	o->conn = w->conn;
	o->nonce = w->nonce;
	o->seq = 0;
	o->state = OUT_READY;
	q = o->q_head;
	o->q_head = NULL;
	o->q_tail = &o->q_head;
	o->qlen = 0;
	while (q) { /* in the order they were sent */
		struct ucx_send *n = q->next;
		int rc = psl__ucx_post(o, q);
		q->next = NULL;
		if (rc) {
			atomic_store(&q->status, rc);
			*ftail = q;
			ftail = &q->next;
		} else {
			psl__ucx_send_put(q, 0);
		}
		q = n;
	}
	tell = !o->retired && !v->stopping;
	pthread_mutex_unlock(&o->mu);
	fail_queue(failed, 0);
	o->tries = 0;
	if (o->my_id == PSL_VAN_ID_NONE)
		LOG(v, PSL_VAN_LOG_DEBUG, "%s: endpoint up (connection %u there, unregistered)",
		    o->desc, w->conn);
	else
		LOG(v, PSL_VAN_LOG_DEBUG, "%s: endpoint up (connection %u there, as node %d)",
		    o->desc, w->conn, o->my_id);
	if (tell)
		v->host->peer_event(v->host->ctx, o->id, PSL_VAN_PEER_UP, 0, NULL);
	atomic_store(&v->boot_dirty, true);
}

static int out_read(struct ucx_out *o)
{
	for (;;) {
		ssize_t n;
		if (o->rxcap - o->rxlen < 512) {
			size_t cap = o->rxcap ? 2 * o->rxcap : 1024;
			uint8_t *p;
			if (cap > UCXP_WELCOME_SIZE + UCXP_MAX_ADDR + 64)
				return -EPROTO;
			p = realloc(o->rx, cap);
			if (!p)
				return -ENOMEM;
			o->rx = p;
			o->rxcap = cap;
		}
		n = recv(o->fd, o->rx + o->rxlen, o->rxcap - o->rxlen, 0);
		if (n > 0) {
			o->rxlen += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return n == 0 ? -ECONNRESET : -errno;
	}
}

static void out_handshake(struct ucx_out *o)
{
	struct psl_van *v = o->v;
	struct ucxp_welcome w;
	int rc = out_read(o);

	if (!o->greeted && o->rxlen) {
		char other[PSL_VAN_NAME_LEN_MAX + 1], what[96], d[400];
		size_t used;
		int kind = psl__ucxp_classify(o->rx, o->rxlen, &used, other, sizeof(other));
		if (kind == UCXP_PEER_NEED_MORE && !rc)
			return;
		if (kind != UCXP_PEER_UCX && kind != UCXP_PEER_NEED_MORE) {
			psl__ucxp_peer_desc(kind, other, what, sizeof(what));
			/* the core adds which van this node runs */
			snprintf(d, sizeof(d), "%s runs %s", o->where, what);
			psl__ucx_out_fail(o, PSL_VAN_PEER_MISMATCH, -EPROTO, d);
			return;
		}
		if (kind == UCXP_PEER_UCX) {
			memmove(o->rx, o->rx + used, o->rxlen - used);
			o->rxlen -= used;
			o->greeted = true;
		}
	}
	if (o->greeted) {
		int d = psl__ucxp_welcome_decode(o->rx, o->rxlen, &w);
		if (d == 0 && w.status != UCXP_WELCOME_OK) {
			char why[400];
			snprintf(why, sizeof(why),
				 "%s refused this node's connection: %s", o->where,
				 w.status == UCXP_WELCOME_BAD_PROOF
					 ? "it has a PS_JOB_SECRET and this node proves another or "
					   "none: give every node of the job the same PS_JOB_SECRET "
					   "(or PS_JOB_SECRET_FILE)"
				 : w.status == UCXP_WELCOME_NO_SECRET
					 ? "this node has a PS_JOB_SECRET and that node has none: "
					   "give every node of the job the same PS_JOB_SECRET (or "
					   "PS_JOB_SECRET_FILE)"
					 : "for a reason this version does not know");
			psl__ucx_out_fail(o, PSL_VAN_PEER_MISMATCH, -EACCES, why);
			return;
		}
		if (d == 0) {
			out_established(o, &w, o->rx + UCXP_WELCOME_SIZE);
			return;
		}
		if (d == -EPROTO) {
			psl__ucx_out_fail(o, PSL_VAN_PEER_MISMATCH, -EPROTO,
					  "its van ucx answered with a welcome this van does not "
					  "understand: run the same pslite version everywhere");
			return;
		}
	}
	if (rc) {
		char why[160];
		snprintf(why, sizeof(why), "%s %s",
			 o->greeted ? "connection closed during the handshake:"
				    : "connection closed before a greeting:",
			 strerror(-rc));
		out_retry(o, why);
	}
	(void)v;
}

void psl__ucx_out_io(struct ucx_out *o, uint32_t events)
{
	struct psl_van *v = o->v;
	int state;

	if (o->fd < 0)
		return;
	pthread_mutex_lock(&o->mu);
	state = o->state;
	pthread_mutex_unlock(&o->mu);
	switch (state) {
	case OUT_CONNECTING: {
		int err = 0, rc;
		socklen_t el = sizeof(err);
		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		if (getsockopt(o->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
			err = errno;
		if (err) {
			out_retry(o, strerror(err));
			return;
		}
		pthread_mutex_lock(&o->mu);
		o->state = OUT_HANDSHAKE;
		pthread_mutex_unlock(&o->mu);
		rc = psl__ucx_write_some(o->fd, o->tx, o->txlen, &o->txoff);
		if (rc && rc != -EAGAIN) {
			out_retry(o, strerror(-rc));
			return;
		}
		psl__ucx_ep_ctl(v, EPOLL_CTL_MOD, o->fd, EPOLLIN | EPOLLRDHUP | (rc ? EPOLLOUT : 0), o);
		out_handshake(o);
		return;
	}
	case OUT_HANDSHAKE:
		if ((events & EPOLLOUT) && o->txoff < o->txlen) {
			int rc = psl__ucx_write_some(o->fd, o->tx, o->txlen, &o->txoff);
			if (rc && rc != -EAGAIN) {
				out_retry(o, strerror(-rc));
				return;
			}
			if (!rc)
				psl__ucx_ep_ctl(v, EPOLL_CTL_MOD, o->fd, EPOLLIN | EPOLLRDHUP, o);
		}
		out_handshake(o);
		return;
	case OUT_READY: {
		/* nothing comes after the welcome: data is junk, the end is news */
		uint8_t junk[256];
		ssize_t n;
		do {
			n = recv(o->fd, junk, sizeof(junk), 0);
		} while (n > 0 || (n < 0 && errno == EINTR));
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (o->retired || o->closing) {
			out_close_fd(o);
			return;
		}
		{
			char d[256];
			snprintf(d, sizeof(d), "%s closed the connection (%s)", o->where,
				 n == 0 ? "the process ended or closed it" : strerror(errno));
			psl__ucx_out_fail(o, PSL_VAN_PEER_DOWN, -ECONNRESET, d);
		}
		return;
	}
	default:
		out_close_fd(o);
		return;
	}
}

/* --------------------------------------------------------------- timers -- */

/* A retired connection: close its endpoint once every send posted on it is
 * complete (UCX 1.13 can drop sends still waiting for the endpoint's wire-up
 * when it is closed, flush or not), then let it go. Returns true when it can
 * be freed. */
static bool out_retire_step(struct ucx_out *o)
{
	int state;
	ucp_ep_h ep = NULL;
	uint32_t qlen;

	if (atomic_load(&o->posted) > 0)
		return false;
	pthread_mutex_lock(&o->mu);
	state = o->state;
	qlen = o->qlen;
	if (state == OUT_READY && !o->closing) {
		ep = o->ep;
		o->ep = NULL;
		o->state = OUT_FAILED;
		o->err = -ESHUTDOWN;
	}
	pthread_mutex_unlock(&o->mu);
	if (ep) {
		ep_close(o, ep, false); /* flush: what was sent arrives */
		LOG(o->v, PSL_VAN_LOG_DEBUG, "%s: closing the replaced connection", o->desc);
	}
	if (o->close_req) {
		ucs_status_t st;
		st = ucp_request_check_status(o->close_req);
		if (st != UCS_INPROGRESS)
			ucp_request_free(o->close_req);
		if (st == UCS_INPROGRESS)
			return false;
		o->close_req = NULL;
	}
	if (state == OUT_FAILED || o->closing || (qlen == 0 && state != OUT_READY)) {
		out_close_fd(o);
		return true;
	}
	return false;
}

int psl__ucx_boot_tick(struct psl_van *v)
{
	int64_t now = psl_van_now_ms();
	struct ucx_out **snap = NULL, *o, **pp;
	size_t n = 0, cap = 0, i;
	bool dirty = atomic_exchange(&v->boot_dirty, false);
	bool pending_close = false;

	if (!dirty && (v->next_timer < 0 || now < v->next_timer))
		return v->next_timer < 0 ? -1 : (int)(v->next_timer - now);
	v->next_timer = -1;

	pthread_mutex_lock(&v->mu);
	for (o = v->outs; o; o = o->next)
		cap++;
	snap = cap ? malloc(cap * sizeof(*snap)) : NULL;
	for (o = v->outs; o && snap; o = o->next)
		snap[n++] = o;
	pthread_mutex_unlock(&v->mu);

	for (i = 0; i < n; i++) {
		int state;
		bool retired;
		o = snap[i];
		pthread_mutex_lock(&o->mu);
		state = o->state;
		retired = o->retired;
		pthread_mutex_unlock(&o->mu);
		if (o->close_req && !retired) { /* a forced close of a failed peer */
			ucs_status_t st;
			st = ucp_request_check_status(o->close_req);
			if (st != UCS_INPROGRESS)
				ucp_request_free(o->close_req);
			if (st != UCS_INPROGRESS)
				o->close_req = NULL;
			else
				pending_close = true;
		}
		/* disconnected by the core (its node is lost): cancel what is
		 * in flight on it now, then retire as usual */
		if (retired && o->force && state != OUT_FAILED) {
			psl__ucx_out_fail(o, PSL_VAN_PEER_DOWN, -ECONNRESET, "disconnected");
			state = OUT_FAILED;
		}
		/* a retired connection that sends still wait for keeps connecting */
		if (retired && (state == OUT_READY || state == OUT_FAILED ||
				atomic_load(&o->posted) == 0)) {
			if (out_retire_step(o))
				o->freeable = true;
			else
				pending_close = true;
			continue;
		}
		if (state == OUT_IDLE) {
			if (now >= o->t_retry)
				out_start(o);
			else
				psl__ucx_schedule(v, o->t_retry);
		} else if (state == OUT_CONNECTING || state == OUT_HANDSHAKE) {
			if (now >= o->t_deadline) {
				if (state == OUT_HANDSHAKE && !o->greeted && o->rxlen == 0) {
					char d[320];
					snprintf(d, sizeof(d),
						 "%s accepted the TCP connection but sent no "
						 "greeting within %d ms: it is not a pslite node, "
						 "or runs a van that does not greet",
						 o->where, v->handshake_ms);
					psl__ucx_out_fail(o, PSL_VAN_PEER_MISMATCH, -EPROTO, d);
				} else {
					out_retry(o, state == OUT_CONNECTING
							     ? "TCP connect timed out"
							     : "the handshake timed out");
				}
			} else {
				psl__ucx_schedule(v, o->t_deadline);
			}
		}
	}
	/* let go of retired connections that are closed */
	pthread_mutex_lock(&v->mu);
	for (pp = &v->outs; *pp;) {
		o = *pp;
		if (o->freeable) {
			*pp = o->next;
			psl__ucx_out_free(o);
		} else {
			pp = &o->next;
		}
	}
	pthread_mutex_unlock(&v->mu);
	free(snap);

	psl__ucx_in_tick(v, now);
	if (pending_close)
		psl__ucx_schedule(v, now + 10);
	now = psl_van_now_ms();
	return v->next_timer < 0 ? -1 : (int)(v->next_timer > now ? v->next_timer - now : 0);
}
