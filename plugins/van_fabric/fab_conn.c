/* van_fabric: the bootstrap connections (greeting, hello, liveness). */

#define _GNU_SOURCE 1
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "fabric.h"

/* ---------------------------------------------------------- bootstrap -- */

int fab_ep_add(struct psl_van *v, struct fab_conn *c, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = c};
	return epoll_ctl(v->epfd, EPOLL_CTL_ADD, c->fd, &ev) ? -errno : 0;
}

static void ep_mod(struct psl_van *v, struct fab_conn *c, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = c};
	epoll_ctl(v->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void conn_close(struct psl_van *v, struct fab_conn *c)
{
	if (c->fd < 0)
		return;
	epoll_ctl(v->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	c->in_len = 0;
	c->greeted = false;
}

/* Reads what is there. 1 if the peer closed or failed, 0 otherwise. */
static int conn_read(struct fab_conn *c)
{
	for (;;) {
		ssize_t n;
		if (c->in_len == sizeof(c->in))
			return 0;
		n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
		if (n > 0) {
			c->in_len += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		return 1;
	}
}

static void consume(struct fab_conn *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}

static int send_greeting(int fd)
{
	char g[PSL_VAN_GREETING_LEN_MAX];
	size_t n = psl_van_greeting_build(g, sizeof(g), VAN);
	return n ? fab_write_all(fd, g, n) : -EINVAL;
}

int fab_send_hello(int fd, const struct fab_hello *h)
{
	uint8_t buf[FAB_HELLO_WIRE];
	fab_hello_pack(h, buf);
	return fab_write_all(fd, buf, sizeof(buf));
}

/* Reads the greeting. 1: done, 0: need more, <0: not a fabric van (what[]
 * says what the peer speaks, as "runs van 'ucx'"). */
static int read_greeting(struct fab_conn *c, char *what, size_t wlen)
{
	char name[PSL_VAN_NAME_LEN_MAX + 1];
	size_t used = 0;
	switch (psl_van_greeting_parse(c->in, c->in_len, name, sizeof(name), &used)) {
	case PSL_VAN_GREET_MORE:
		return 0;
	case PSL_VAN_GREET_ZMTP:
		snprintf(what, wlen, "speaks ZeroMQ (van 'zmq', or a C++ ps-lite node)");
		return -EPROTO;
	case PSL_VAN_GREET_OK:
		consume(c, used);
		c->greeted = true;
		if (strcmp(name, VAN) != 0) {
			snprintf(what, wlen, "runs van '%s'", name);
			return -EPROTO;
		}
		return 1;
	default:
		snprintf(what, wlen, "answers with something that is no pslite van");
		return -EPROTO;
	}
}

/* err: -EPROTO when the peer speaks another van (the core then names this
 * node's), another -errno when it refused this node for a reason in detail. */
static void peer_fail(struct psl_van *v, struct fab_peer *p, int err, const char *detail)
{
	pthread_mutex_lock(&p->mu);
	p->state = P_DOWN;
	p->told = true;
	fab_fail_queue(v, p, err);
	pthread_mutex_unlock(&p->mu);
	conn_close(v, &p->conn);
	/* the core reports it, naming the node */
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d: %s", p->id, detail);
	if (!atomic_load(&p->retiring))
		v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_MISMATCH, err, detail);
}

static void peer_mismatch(struct psl_van *v, struct fab_peer *p, const char *detail)
{
	peer_fail(v, p, -EPROTO, detail);
}

/* A peer that accepted the connection has not greeted by its deadline: a
 * busy node (many connecting at once, an emulated or loaded machine) gets a
 * warning and until PS_CONNECT_TIMEOUT; then it is taken for another
 * protocol. */
static void handshake_late(struct psl_van *v, struct fab_peer *p, int64_t now)
{
	char detail[512];
	int64_t waited = now - p->hs_start_ms;
	if (waited < v->connect_ms) {
		LOG(v, PSL_VAN_LOG_WARN,
		    "node %d at %s accepted the connection but has not greeted for %lld s (a "
		    "busy node, or not a pslite van): waiting up to PS_CONNECT_TIMEOUT (%lld s)",
		    p->id, p->where, (long long)(waited / 1000), (long long)(v->connect_ms / 1000));
		p->hs_deadline_ms = p->hs_start_ms + v->connect_ms;
		return;
	}
	snprintf(detail, sizeof(detail),
		 "the node at %s accepted the connection but did not greet within %lld s "
		 "(PS_CONNECT_TIMEOUT): it does not run a pslite van (or runs an old one)",
		 p->where, (long long)(waited / 1000));
	peer_mismatch(v, p, detail);
}

static void peer_connect_now(struct psl_van *v, struct fab_peer *p, int64_t now)
{
	int rc = fab_tcp_connect(p->host, p->port, &p->conn.fd);
	if (rc) {
		p->conn.fd = -1;
		p->retry_at_ms = now + p->retry_ms;
		return;
	}
	p->conn.type = CONN_OUT;
	p->conn.owner = p;
	pthread_mutex_lock(&p->mu);
	p->state = P_HANDSHAKE;
	pthread_mutex_unlock(&p->mu);
	p->hs_start_ms = now;
	p->hs_deadline_ms = now + HANDSHAKE_MS;
	p->hello_sent = false;
	p->conn.greeted = false;
	/* the greeting and hello go out once the connection is made */
	fab_ep_add(v, &p->conn, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
}

static void peer_retry_later(struct psl_van *v, struct fab_peer *p, int64_t now, const char *why)
{
	conn_close(v, &p->conn);
	p->hello_sent = false;
	pthread_mutex_lock(&p->mu);
	p->state = P_CONNECTING;
	pthread_mutex_unlock(&p->mu);
	LOG(v, PSL_VAN_LOG_TRACE, "node %d: %s: %s; trying again in %d ms", p->id, p->where, why,
	    p->retry_ms);
	p->retry_at_ms = now + p->retry_ms;
	p->retry_ms = p->retry_ms * 2 > 1000 ? 1000 : p->retry_ms * 2;
}

/* With p->mu held: a lost node disconnected FAB_DROP_GRACE_MS ago still
 * holds sends; they fail now (the core's requests wait for them), as when
 * a connection breaks (fab_report_down: posted ones are reported before
 * the provider has let go of them). True if it did that. */
static bool drop_due(struct psl_van *v, struct fab_peer *p, int64_t now)
{
	if (!atomic_load(&p->retiring) || !p->drop_at_ms || now < p->drop_at_ms ||
	    (!p->qhead && !p->live) || p->state == P_DOWN)
		return false;
	fab_fail_pending(v, p, -ECONNRESET);
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d at %s: disconnected %d ms ago, its pending sends "
	    "fail", p->id, p->where, FAB_DROP_GRACE_MS);
	return true;
}

void fab_peer_io(struct psl_van *v, struct fab_peer *p, uint32_t events)
{
	int64_t now = psl_van_now_ms();
	char what[96], detail[512];
	struct fab_hello h;
	int rc;

	if (p->state == P_HANDSHAKE && !p->hello_sent && (events & EPOLLOUT) &&
	    !(events & (EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t el = sizeof(err);
		getsockopt(p->conn.fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) {
			peer_retry_later(v, p, now, strerror(err));
			return;
		}
		{
			memset(&h, 0, sizeof(h));
			h.kind = FAB_HELLO;
			h.node_id = p->my_id;
			h.hdr_max = (uint32_t)v->hdr_buf;
			h.addr_len = (uint32_t)v->name_len;
			memcpy(h.addr, v->name, v->name_len);
			snprintf(h.prov, sizeof(h.prov), "%s", v->prov);
			if (v->secret) {
				h.text[0] = FAB_HELLO_PROOF;
				if (psl_van_proof_make(v->host, VAN, p->my_id,
						       (uint8_t *)h.text + 1)) {
					peer_fail(v, p, -EACCES,
						  "cannot prove PS_JOB_SECRET on a connection");
					return;
				}
			}
			if (send_greeting(p->conn.fd) || fab_send_hello(p->conn.fd, &h)) {
				peer_retry_later(v, p, now, "cannot write the hello");
				return;
			}
			p->hello_sent = true;
		}
		ep_mod(v, &p->conn, EPOLLIN | EPOLLRDHUP);
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) {
		int closed = conn_read(&p->conn);
		if (p->state == P_HANDSHAKE) {
			if (!p->conn.greeted) {
				rc = read_greeting(&p->conn, what, sizeof(what));
				if (rc < 0) {
					/* the core adds "but this node runs van 'fabric'" */
					snprintf(detail, sizeof(detail), "%s %s", p->where, what);
					peer_mismatch(v, p, detail);
					return;
				}
			}
			if (p->conn.greeted && p->conn.in_len >= FAB_HELLO_WIRE) {
				rc = fab_hello_unpack(p->conn.in, &h);
				consume(&p->conn, FAB_HELLO_WIRE);
				if (rc || h.kind == FAB_REFUSE || h.kind != FAB_ACCEPT) {
					h.text[sizeof(h.text) - 1] = 0;
					snprintf(detail, sizeof(detail),
						 "the fabric van at %s refused this node: %s", p->where,
						 rc ? "its answer is malformed (another pslite version?)"
						 : h.text[0] ? h.text : "no reason given");
					if (rc)
						peer_mismatch(v, p, detail);
					else
						peer_fail(v, p, -ECONNREFUSED, detail);
					return;
				}
				if (h.addr_len == 0 || h.stream == 0 || h.stream > FAB_STREAM_MAX) {
					peer_mismatch(v, p, "the peer sent no endpoint name or stream");
					return;
				}
				{
					fi_addr_t fa = FI_ADDR_NOTAVAIL;
					int n = fi_av_insert(v->av, h.addr, 1, &fa, 0, NULL);
					if (n != 1) {
						snprintf(detail, sizeof(detail),
							 "cannot add the endpoint of %s (%s) to the "
							 "address vector",
							 p->where, h.prov);
						peer_mismatch(v, p, detail);
						return;
					}
					pthread_mutex_lock(&p->mu);
					p->fa = fa;
					p->stream = h.stream;
					p->hdr_max = h.hdr_max;
					p->state = P_UP;
					if (fab_post_queue(v, p) == -EAGAIN)
						fab_wake(v);
					pthread_mutex_unlock(&p->mu);
				}
				fab_keepalive(p->conn.fd);
				LOG(v, PSL_VAN_LOG_DEBUG,
				    "node %d at %s reached as node %d: stream %u, provider %s",
				    p->id, p->where, p->my_id, p->stream, h.prov);
				if (!atomic_load(&p->retiring))
					v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_UP, 0,
							    NULL);
				return;
			}
			if (closed) {
				if (p->conn.in_len == 0 && !p->conn.greeted)
					peer_retry_later(v, p, now, "connection closed");
				else
					peer_mismatch(v, p, "the peer closed the connection during "
							    "the handshake");
			}
			return;
		}
		if (closed) {
			conn_close(v, &p->conn);
			snprintf(detail, sizeof(detail),
				 "%s closed its bootstrap connection (the process ended or was "
				 "killed)",
				 p->where);
			fab_report_down(v, p, -ECONNRESET, detail);
			return;
		}
		p->conn.in_len = 0; /* nothing is expected once up */
	}
}

static struct fab_stream *stream_new(struct psl_van *v)
{
	struct fab_stream *s;
	uint32_t id, tries;
	for (tries = 0; tries < FAB_STREAM_MAX; tries++) {
		id = v->next_stream;
		v->next_stream = v->next_stream >= FAB_STREAM_MAX ? 1 : v->next_stream + 1;
		if (!fab_stream_get(v, id))
			break;
	}
	if (id >= v->nstreams) {
		uint32_t n = id + 64;
		struct fab_stream **ns = realloc(v->streams, n * sizeof(*ns));
		if (!ns)
			return NULL;
		memset(ns + v->nstreams, 0, (n - v->nstreams) * sizeof(*ns));
		v->streams = ns;
		v->nstreams = n;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = id;
	s->sender = PSL_VAN_ID_NONE;
	s->conn.fd = -1;
	s->conn.type = CONN_IN;
	s->conn.owner = s;
	v->streams[id] = s;
	s->next_all = v->all_streams;
	v->all_streams = s;
	return s;
}

/* Drops the stream's unfinished messages and frees it. */
void fab_stream_free(struct psl_van *v, struct fab_stream *s)
{
	struct fab_stream **pp;
	struct fab_oq_ent *e = s->oq.head;
	conn_close(v, &s->conn);
	while (e) {
		struct fab_rx *r = (struct fab_rx *)((char *)e - offsetof(struct fab_rx, oq));
		uint32_t i;
		e = e->next;
		if (r->pending == 0) {
			fab_rx_free(r);
			continue;
		}
		r->orphan = true;
		r->next_orphan = v->orphans;
		v->orphans = r;
		for (i = 0; i < r->nparts; i++)
			if (r->part[i].buf) {
				EP_LOCK(v);
				fi_cancel(&v->ep->fid, &r->part[i].ctx);
				EP_UNLOCK(v);
			}
	}
	v->streams[s->id] = NULL;
	for (pp = &v->all_streams; *pp; pp = &(*pp)->next_all)
		if (*pp == s) {
			*pp = s->next_all;
			break;
		}
	free(s);
}

void fab_stream_io(struct psl_van *v, struct fab_stream *s, uint32_t events)
{
	char what[96];
	struct fab_hello h, a;
	int closed = conn_read(&s->conn), rc;
	(void)events;

	if (!s->conn.greeted) {
		rc = read_greeting(&s->conn, what, sizeof(what));
		if (rc < 0) {
			/* a ZeroMQ peer connects again and again: say it a few times */
			LOG(v, v->mismatches++ < 3 ? PSL_VAN_LOG_ERROR : PSL_VAN_LOG_DEBUG,
			    "the node at %s that connected %s, but this node runs van 'fabric': "
			    "start every node with the same DMLC_ENABLE_RDMA",
			    s->where, what);
			fab_stream_free(v, s);
			return;
		}
	}
	while (s->conn.greeted && s->conn.in_len >= FAB_HELLO_WIRE) {
		rc = fab_hello_unpack(s->conn.in, &h);
		consume(&s->conn, FAB_HELLO_WIRE);
		if (rc) {
			LOG(v, PSL_VAN_LOG_WARN, "a malformed hello from %s: closed", s->where);
			fab_stream_free(v, s);
			return;
		}
		if (h.kind == FAB_BYE) {
			s->closing = true;
			s->have_last = true;
			s->last = h.seq;
			s->close_at = psl_van_now_ms() + 2000;
			continue;
		}
		if (h.kind != FAB_HELLO || s->open)
			continue;
		memset(&a, 0, sizeof(a));
		snprintf(a.prov, sizeof(a.prov), "%s", v->prov);
		a.hdr_max = (uint32_t)v->hdr_buf;
		if (strncmp(h.prov, v->prov, sizeof(h.prov)) != 0) {
			a.kind = FAB_REFUSE;
			snprintf(a.text, sizeof(a.text),
				 "libfabric provider %.40s there, %.40s here: set the same FI_PROVIDER "
				 "on every node",
				 v->prov, h.prov);
			LOG(v, PSL_VAN_LOG_ERROR,
			    "node %d at %s uses libfabric provider %s, this node %s: set the same "
			    "FI_PROVIDER on every node",
			    h.node_id, s->where, h.prov, v->prov);
			fab_send_hello(s->conn.fd, &a);
			fab_stream_free(v, s);
			return;
		}
		if (v->secret || h.text[0] == FAB_HELLO_PROOF) {
			bool has = h.text[0] == FAB_HELLO_PROOF;
			const uint8_t *proof = (const uint8_t *)h.text + 1;
			if (!v->secret || !has ||
			    psl_van_proof_check(v->host, VAN, h.node_id, proof) ||
			    !psl_van_nonce_fresh(&v->nonces, proof)) {
				a.kind = FAB_REFUSE;
				snprintf(a.text, sizeof(a.text), "%s",
					 v->secret ? "it has a PS_JOB_SECRET and this node proves "
						     "another or none: give every node the same "
						     "PS_JOB_SECRET"
						   : "this node has a PS_JOB_SECRET and that node has "
						     "none: give every node the same PS_JOB_SECRET");
				LOG(v, PSL_VAN_LOG_WARN,
				    "refused a connection from %s (%s %d): %s", s->where,
				    h.node_id == PSL_VAN_ID_NONE ? "not registered yet, id"
								 : "as node",
				    h.node_id,
				    v->secret ? "it proves no PS_JOB_SECRET this node has (a "
						"stranger, or a node with another secret or none)"
					      : "it proves a PS_JOB_SECRET and this node has none");
				fab_send_hello(s->conn.fd, &a);
				fab_stream_free(v, s);
				return;
			}
		}
		a.kind = FAB_ACCEPT;
		a.stream = s->id;
		a.addr_len = (uint32_t)v->name_len;
		memcpy(a.addr, v->name, v->name_len);
		if (fab_send_hello(s->conn.fd, &a)) {
			fab_stream_free(v, s);
			return;
		}
		s->open = true;
		s->sender = h.node_id;
		fab_keepalive(s->conn.fd);
		LOG(v, PSL_VAN_LOG_DEBUG, "node %d at %s connected: stream %u", s->sender, s->where,
		    s->id);
	}
	if (closed) {
		conn_close(v, &s->conn);
		if (!s->open) {
			fab_stream_free(v, s);
			return;
		}
		if (!s->closing) {
			s->closing = true;
			s->close_at = psl_van_now_ms() + 2000;
		}
	}
}

void fab_on_accept(struct psl_van *v)
{
	for (;;) {
		int fd = accept4(v->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct fab_stream *s;
		if (fd < 0)
			return;
		s = stream_new(v);
		if (!s) {
			close(fd);
			continue;
		}
		s->conn.fd = fd;
		fab_sockname(fd, true, s->where, sizeof(s->where));
		/* as long as a connecting node waits for our greeting: a busy
		 * node (33 starting at once on 2 emulated CPUs) said hello after
		 * 10 s, to a stream already closed */
		s->close_at = psl_van_now_ms() +
			      (v->connect_ms > HANDSHAKE_MS ? v->connect_ms : HANDSHAKE_MS);
		if (send_greeting(fd) || fab_ep_add(v, &s->conn, EPOLLIN | EPOLLRDHUP)) {
			fab_stream_free(v, s);
			continue;
		}
	}
}

int fab_housekeeping(struct psl_van *v)
{
	int64_t now = psl_van_now_ms(), next = now + 60000;
	struct fab_peer *p, *np;
	struct fab_stream *s, *ns;

	pthread_mutex_lock(&v->mu);
	np = v->newpeers;
	v->newpeers = NULL;
	pthread_mutex_unlock(&v->mu);
	while (np) {
		p = np;
		np = np->next_new;
		p->next_all = v->all_peers;
		v->all_peers = p;
		p->deadline_ms = now + v->connect_ms;
		p->retry_ms = 50;
		p->retry_at_ms = now;
	}
	for (p = v->all_peers; p; p = p->next_all) {
		int st;
		bool broken;
		pthread_mutex_lock(&p->mu);
		if (drop_due(v, p, now)) {
			pthread_mutex_unlock(&p->mu);
			conn_close(v, &p->conn);
			continue;
		}
		if (p->drop_at_ms && p->state != P_DOWN && p->drop_at_ms < next)
			next = p->drop_at_ms;
		st = p->state;
		if (atomic_load(&p->retiring) && st == P_UP && !p->qhead && !p->inflight &&
		    !p->bye_sent && p->conn.fd >= 0) {
			struct fab_hello b;
			memset(&b, 0, sizeof(b));
			b.kind = FAB_BYE;
			b.seq = p->next_seq;
			fab_send_hello(p->conn.fd, &b);
			p->bye_sent = true;
			p->state = P_DOWN;
			st = P_DOWN;
			pthread_mutex_unlock(&p->mu);
			conn_close(v, &p->conn);
			continue;
		}
		if (st == P_UP && p->qhead && fab_post_queue(v, p) == -EAGAIN)
			next = now;
		broken = p->broken && st == P_UP;
		pthread_mutex_unlock(&p->mu);
		if (broken) {
			char detail[256];
			snprintf(detail, sizeof(detail),
				 "a message to %s could not be sent whole: the provider refused it",
				 p->where);
			fab_report_down(v, p, -EIO, detail);
			continue;
		}
		if (st == P_CONNECTING && p->conn.fd < 0 && !atomic_load(&p->retiring)) {
			if (now >= p->deadline_ms) {
				char detail[256];
				snprintf(detail, sizeof(detail),
					 "cannot reach %s within PS_CONNECT_TIMEOUT (+5 s): is the node "
					 "running, and is the address right?",
					 p->where);
				pthread_mutex_lock(&p->mu);
				p->state = P_DOWN;
				fab_fail_queue(v, p, -EHOSTUNREACH);
				pthread_mutex_unlock(&p->mu);
				LOG(v, PSL_VAN_LOG_ERROR, "node %d: %s", p->id, detail);
				v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_DOWN,
						    -EHOSTUNREACH, detail);
				p->told = true;
				continue;
			}
			if (now >= p->retry_at_ms)
				peer_connect_now(v, p, now);
			if (p->conn.fd < 0 && p->retry_at_ms < next)
				next = p->retry_at_ms;
		} else if (st == P_HANDSHAKE) {
			if (now >= p->hs_deadline_ms) {
				handshake_late(v, p, now);
			} else if (p->hs_deadline_ms < next) {
				next = p->hs_deadline_ms;
			}
		}
	}
	for (s = v->all_streams; s; s = ns) {
		ns = s->next_all;
		if (!s->open && !s->closing) {
			if (now >= s->close_at) {
				LOG(v, PSL_VAN_LOG_DEBUG, "%s connected but did not say hello: closed",
				    s->where);
				fab_stream_free(v, s);
			} else if (s->close_at < next) {
				next = s->close_at;
			}
			continue;
		}
		if (!s->closing)
			continue;
		if ((s->have_last && s->oq.next == s->last && !s->oq.head) || now >= s->close_at)
			fab_stream_free(v, s);
		else if (s->close_at < next)
			next = s->close_at;
	}
	if (atomic_load(&v->retry))
		return 1;
	return next <= now ? 0 : (int)(next - now);
}
