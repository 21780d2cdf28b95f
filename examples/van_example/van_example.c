/*
 * van_example: a complete pslite van over plain TCP sockets, written to be
 * read (docs/writing-a-van.md is the tour). It moves messages between
 * processes on any hosts, reports lost peers, greets as van.h asks, reads
 * its settings with van_util.h, can receive large segments into memory the
 * core lends (recv_dest), and passes pslite-vantest. It builds outside
 * pslite's tree with nothing but the installed headers (see Makefile):
 *
 *   DMLC_ENABLE_RDMA=example  loads van_example.so
 *
 * Design: one thread per instance owns every socket and sleeps in poll().
 * send() only queues (under the mutex) and wakes the thread; the thread
 * writes, reads, and calls the host's callbacks with the mutex released.
 * progress() (optional, ABI 1.3) lets a thread that waits for a reply read
 * the incoming sockets itself: see "caller-driven progress" below.
 *
 * Connections are one-way, like ps-lite's ZeroMQ van: connect(peer) opens
 * an outgoing connection that carries this node's messages to the peer;
 * what the peer sends comes on the connection it opened to us. Wire:
 *
 *   acceptor -> connector:  "PSLVAN1 example\n"      (van.h's greeting)
 *   connector -> acceptor:  frames, each a 16-byte header of four
 *                           little-endian u32: magic "PEX1", kind,
 *                           a, b; then
 *     kind HELLO: a = the connector's node id, b = 0 or, when the job
 *                 has a secret (PS_JOB_SECRET), the length of the proof
 *                 record that follows (van_util.h's psl_van_proof_make);
 *                 sent first, and again when connect() is called with a
 *                 new id. With a secret, the acceptor closes a connection
 *                 whose hello proves nothing, or no secret it shares.
 *     kind MSG:   a = meta bytes, b = segments; then b u64 segment lengths,
 *                 the meta, the segments
 *
 * Settings:
 *   PS_CONNECT_TIMEOUT=S     seconds to keep retrying a peer that refuses
 *                            connections (60), like the other vans
 *   PS_EXAMPLE_LINGER_MS=MS  how long fini keeps writing queued messages
 *                            before it fails them (1000)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <pslite/van.h>
#include <pslite/van_util.h>

#ifndef VAN_NAME
#define VAN_NAME "example" /* must match the file name van_<name>.so */
#endif
#define VAN_VERSION "1.0"
#define MAGIC 0x31584550u /* "PEX1" */
#define K_HELLO 1u
#define K_MSG 2u
#define MAX_SEGS 64
#define MAX_META (64u << 20)
#define DEST_MIN (64u << 10) /* ask the core where segments this large go */
#define GREET_MS 10000	     /* a connected port must greet within this */
#define ASIDE_NS 1000000     /* the thread leaves reading to callers this long */

#define LOG(v, lvl, ...) psl_van_log((v)->host, (lvl), VAN_NAME, __VA_ARGS__)

/* ------------------------------------------------------------ the state -- */

struct sendrec { /* one queued send */
	struct sendrec *next;
	void *cookie;
	int status;
	struct iovec iov[1 + MAX_SEGS]; /* head (header, lengths, meta), segments */
	int niov, cur;
	uint8_t head[]; /* the copied header, lengths and meta */
};

enum { C_WAIT, C_CONNECTING, C_GREET, C_UP, C_DOWN };

struct outconn { /* to a peer: carries our messages */
	struct outconn *next;
	int32_t id;
	char host[256];
	int port;
	int fd, state;
	bool retired; /* replaced or disconnected: the thread closes it */
	int64_t retry_at, give_up_at, greet_by;
	char greet[PSL_VAN_GREETING_LEN_MAX];
	size_t glen;
	struct sendrec *q, *qtail;
};

struct inconn { /* from a peer: carries its messages (under rx_mu) */
	struct inconn *next;
	int fd;
	int32_t sender, claimed;
	bool proven; /* a hello proved the job's secret (with one) */
	uint8_t hdr[16];
	uint8_t proof[PSL_VAN_PROOF_LEN];
	size_t got;	  /* bytes of the current part */
	int part;	  /* 0 header, 1 lengths, 2 meta, 3.. segment part-3,
			     -1 a hello's proof */
	struct rxmsg *rx; /* the message being received */
};

struct rxmsg { /* a received message, handed to the core */
	struct psl_van_rmsg pub;
	struct psl_van_rseg segs[MAX_SEGS];
	uint64_t lens[MAX_SEGS];
	void *loans[MAX_SEGS]; /* recv_dest loans to hand back */
	void *data;	       /* the segments not lent */
	uint8_t meta[];
};

struct event {
	struct event *next;
	int32_t id;
	int ev, err;
	char detail[300];
};

struct psl_van {
	const struct psl_van_host *host;
	pthread_mutex_t mu;
	pthread_t thread;
	bool running, stopping;
	int wake_fd, listen_fd;
	int64_t linger_ms, connect_ms, linger_until;
	struct outconn *out;  /* under mu */
	struct inconn *fresh; /* accepted, not yet in the list below (under mu) */
	/* Whoever holds rx_mu reads the incoming connections: the thread, or a
	 * caller in progress(). Take it before mu, never while holding mu. */
	pthread_mutex_t rx_mu;
	struct inconn *in;	     /* under rx_mu */
	unsigned long delivered;     /* messages handed to recv (under rx_mu) */
	struct pollfd *cpf;	     /* a caller's poll set (under rx_mu) */
	void **cwho;
	size_t ccap;
	_Atomic int64_t aside_until; /* callers read until then (ns) */
	struct sendrec *done; /* completed, for send_done after unlock */
	struct event *evs, **evtail;
	bool secret;		     /* the job has a secret: hellos prove it */
	struct psl_van_nonces nonces; /* of the proofs taken (the thread's) */
};

static void wake(struct psl_van *v)
{
	uint64_t one = 1;
	if (write(v->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		LOG(v, PSL_VAN_LOG_WARN, "cannot wake the van's thread: %s", strerror(errno));
}

/* Queues a peer event (mu held); the thread reports it after unlocking. */
static void event(struct psl_van *v, int32_t id, int ev, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void event(struct psl_van *v, int32_t id, int ev, int err, const char *fmt, ...)
{
	struct event *e = calloc(1, sizeof(*e));
	va_list ap;
	if (!e)
		return;
	e->id = id;
	e->ev = ev;
	e->err = err;
	va_start(ap, fmt);
	vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
	va_end(ap);
	*v->evtail = e;
	v->evtail = &e->next;
}

/* Completes every queued send of c with status (mu held). */
static void fail_queue(struct psl_van *v, struct outconn *c, int status)
{
	while (c->q) {
		struct sendrec *r = c->q;
		c->q = r->next;
		r->status = status;
		r->next = v->done;
		v->done = r;
	}
	c->qtail = NULL;
}

static void set_down(struct psl_van *v, struct outconn *c, int err, bool report)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = C_DOWN;
	fail_queue(v, c, err);
	if (report && !c->retired)
		event(v, c->id, PSL_VAN_PEER_DOWN, err, "%s:%d: %s", c->host, c->port,
		      strerror(-err));
}

/* ------------------------------------------------------------- sending -- */

static struct sendrec *hello_rec(struct psl_van *v, int32_t my_id)
{
	size_t plen = v->secret ? PSL_VAN_PROOF_LEN : 0;
	struct sendrec *r = calloc(1, sizeof(*r) + 16 + plen);
	if (!r)
		return NULL;
	psl_van_put_le32(r->head, MAGIC);
	psl_van_put_le32(r->head + 4, K_HELLO);
	psl_van_put_le32(r->head + 8, (uint32_t)my_id);
	psl_van_put_le32(r->head + 12, (uint32_t)plen);
	if (plen && psl_van_proof_make(v->host, VAN_NAME, my_id, r->head + 16)) {
		free(r);
		return NULL;
	}
	r->iov[0] = (struct iovec){r->head, 16 + plen};
	r->niov = 1;
	return r;
}

static void enqueue(struct outconn *c, struct sendrec *r)
{
	r->next = NULL;
	if (c->qtail)
		c->qtail->next = r;
	else
		c->q = r;
	c->qtail = r;
}

static struct outconn *find_out(struct psl_van *v, int32_t id)
{
	struct outconn *c;
	for (c = v->out; c; c = c->next)
		if (c->id == id && !c->retired)
			return c;
	return NULL;
}

static int ex_send(struct psl_van *v, int32_t node_id, const void *meta, size_t meta_len,
		   const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	size_t head = 16 + 8 * (size_t)nseg + meta_len;
	struct sendrec *r;
	struct outconn *c;
	uint32_t i;
	int rc = 0;
	bool was_empty;

	if (meta_len > MAX_META) {
		LOG(v, PSL_VAN_LOG_ERROR,
		    "cannot send a meta of %zu bytes to node %d: this van carries metas of at most "
		    "%u MiB (MAX_META in van_example.c)",
		    meta_len, node_id, MAX_META >> 20);
		return -EMSGSIZE;
	}
	if (nseg > MAX_SEGS || (meta_len && !meta))
		return -EINVAL;
	for (i = 0; i < nseg; i++) {
		if (segs[i].mem_type != PSL_MEM_HOST)
			return -ENOTSUP; /* plain sockets read host memory only */
		if (segs[i].len && !segs[i].data)
			return -EINVAL;
	}
	r = malloc(sizeof(*r) + head);
	if (!r)
		return -ENOMEM;
	r->cookie = cookie;
	r->status = 0;
	r->cur = 0;
	psl_van_put_le32(r->head, MAGIC);
	psl_van_put_le32(r->head + 4, K_MSG);
	psl_van_put_le32(r->head + 8, (uint32_t)meta_len);
	psl_van_put_le32(r->head + 12, nseg);
	for (i = 0; i < nseg; i++)
		psl_van_put_le64(r->head + 16 + 8 * i, segs[i].len);
	if (meta_len) /* the meta is copied: the caller may reuse it at once */
		memcpy(r->head + 16 + 8 * nseg, meta, meta_len);
	r->iov[0] = (struct iovec){r->head, head};
	r->niov = 1;
	for (i = 0; i < nseg; i++) /* the segments are not: they stay the caller's */
		if (segs[i].len)
			r->iov[r->niov++] = (struct iovec){(void *)segs[i].data, segs[i].len};

	pthread_mutex_lock(&v->mu);
	c = find_out(v, node_id);
	if (v->stopping)
		rc = -ESHUTDOWN;
	else if (!c)
		rc = -EHOSTUNREACH; /* never connected */
	else if (c->state == C_DOWN)
		rc = -ENOTCONN; /* lost: the core heard PEER_DOWN */
	if (rc) {
		pthread_mutex_unlock(&v->mu);
		free(r); /* an error return: no send_done */
		return rc;
	}
	was_empty = !c->q;
	enqueue(c, r);
	pthread_mutex_unlock(&v->mu);
	if (was_empty)
		wake(v);
	return 0;
}

/* Writes what c's socket takes (mu held). */
static void write_out(struct psl_van *v, struct outconn *c)
{
	while (c->q) {
		struct sendrec *r = c->q;
		struct msghdr mh = {.msg_iov = r->iov + r->cur,
				    .msg_iovlen = (size_t)(r->niov - r->cur)};
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT); /* no SIGPIPE */
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			set_down(v, c, -errno, true);
			return;
		}
		while (n > 0) { /* consume what went */
			struct iovec *io = &r->iov[r->cur];
			if ((size_t)n >= io->iov_len) {
				n -= (ssize_t)io->iov_len;
				r->cur++;
			} else {
				io->iov_base = (char *)io->iov_base + n;
				io->iov_len -= (size_t)n;
				n = 0;
			}
		}
		if (r->cur < r->niov)
			return; /* the socket is full */
		c->q = r->next; /* all in the kernel: the segments are free */
		if (!c->q)
			c->qtail = NULL;
		r->next = v->done;
		v->done = r;
	}
}

/* ---------------------------------------------------------- connecting -- */

static void start_connect(struct psl_van *v, struct outconn *c)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	char port[16];
	int one = 1, rc;

	snprintf(port, sizeof(port), "%d", c->port);
	rc = getaddrinfo(c->host, port, &hints, &ai);
	if (rc || !ai) {
		LOG(v, PSL_VAN_LOG_ERROR, "node %d: cannot resolve %s: %s", c->id, c->host,
		    gai_strerror(rc));
		set_down(v, c, -EHOSTUNREACH, true);
		return;
	}
	c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		freeaddrinfo(ai);
		set_down(v, c, -errno, true);
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = connect(c->fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	c->state = C_CONNECTING;
	if (rc && errno != EINPROGRESS) {
		close(c->fd); /* the thread retries after a while */
		c->fd = -1;
		c->state = C_WAIT;
		c->retry_at = psl_van_now_ms() + 100;
	}
}

/* c's socket is ready (mu held). */
static void out_ready(struct psl_van *v, struct outconn *c, short re)
{
	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t el = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) { /* refused: the peer may not listen yet */
			close(c->fd);
			c->fd = -1;
			if (psl_van_now_ms() >= c->give_up_at) {
				LOG(v, PSL_VAN_LOG_ERROR, "node %d: cannot connect to %s:%d: %s",
				    c->id, c->host, c->port, strerror(err));
				set_down(v, c, -err, true);
			} else {
				c->state = C_WAIT;
				c->retry_at = psl_van_now_ms() + 100;
			}
			return;
		}
		c->state = C_GREET;
		c->greet_by = psl_van_now_ms() + GREET_MS;
		return;
	}
	if (c->state == C_GREET && (re & (POLLIN | POLLHUP | POLLERR))) {
		char name[PSL_VAN_NAME_LEN_MAX + 1], what[128];
		ssize_t n = recv(c->fd, c->greet + c->glen, sizeof(c->greet) - c->glen, 0);
		size_t used = 0;
		int kind;
		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			event(v, c->id, PSL_VAN_PEER_MISMATCH, -EPROTO,
			      "%s:%d closed the connection without a greeting", c->host, c->port);
			set_down(v, c, -EPROTO, false);
			return;
		}
		c->glen += (size_t)n;
		kind = psl_van_greeting_parse(c->greet, c->glen, name, sizeof(name), &used);
		if (kind == PSL_VAN_GREET_MORE && c->glen < sizeof(c->greet))
			return;
		if (kind == PSL_VAN_GREET_OK && !strcmp(name, VAN_NAME)) {
			c->state = C_UP;
			event(v, c->id, PSL_VAN_PEER_UP, 0, "%s:%d", c->host, c->port);
			return;
		}
		event(v, c->id, PSL_VAN_PEER_MISMATCH, -EPROTO, "%s:%d runs %s, not van " VAN_NAME,
		      c->host, c->port, psl_van_greeting_what(kind, name, what, sizeof(what)));
		set_down(v, c, -EPROTO, false);
		return;
	}
	if (c->state == C_UP) {
		if (re & (POLLIN | POLLHUP | POLLERR)) { /* the peer never writes here */
			char b;
			ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
				set_down(v, c, n == 0 ? -ECONNRESET : -errno, true);
				return;
			}
		}
		if (re & POLLOUT)
			write_out(v, c);
	}
}

static int ex_connect(struct psl_van *v, const struct psl_van_peer *peer, int32_t my_id)
{
	struct outconn *c, *old;
	struct sendrec *hello;

	if (!peer->host || peer->port <= 0 || peer->port > 65535)
		return -EINVAL;
	pthread_mutex_lock(&v->mu);
	old = find_out(v, peer->id);
	if (old && old->state != C_DOWN && old->port == peer->port &&
	    !strcmp(old->host, peer->host)) {
		/* the same peer: tell it our new id, in order with the rest */
		hello = hello_rec(v, my_id);
		if (hello)
			enqueue(old, hello);
		pthread_mutex_unlock(&v->mu);
		wake(v);
		return hello ? 0 : -ENOMEM;
	}
	c = calloc(1, sizeof(*c));
	hello = hello_rec(v, my_id);
	if (!c || !hello) {
		pthread_mutex_unlock(&v->mu);
		free(c);
		free(hello);
		return -ENOMEM;
	}
	if (old)
		old->retired = true; /* the thread closes it */
	c->id = peer->id;
	snprintf(c->host, sizeof(c->host), "%s", peer->host);
	c->port = peer->port;
	c->fd = -1;
	c->state = C_WAIT;
	c->retry_at = 0;
	c->give_up_at = psl_van_now_ms() + v->connect_ms;
	enqueue(c, hello); /* the first frame says who we are */
	c->next = v->out;
	v->out = c;
	pthread_mutex_unlock(&v->mu);
	wake(v);
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d: connecting to %s:%d as node %d", peer->id, peer->host,
	    peer->port, my_id);
	return 0;
}

static int ex_disconnect(struct psl_van *v, int32_t node_id)
{
	struct outconn *c;
	pthread_mutex_lock(&v->mu);
	c = find_out(v, node_id);
	if (c)
		c->retired = true;
	pthread_mutex_unlock(&v->mu);
	wake(v);
	return c ? 0 : -ENOENT;
}

/* ----------------------------------------------------------- receiving -- */

static void rx_release(struct psl_van_rmsg *m)
{
	struct rxmsg *r = (struct rxmsg *)m; /* pub is its first member */
	free(r->data);
	free(r);
}

/* Drops a message half received: its loans go back with an error. */
static void rx_drop(struct psl_van *v, struct rxmsg *r, int err)
{
	uint32_t s;
	if (!r)
		return;
	for (s = 0; s < r->pub.nseg; s++)
		if (r->loans[s])
			v->host->recv_dest_put(v->host->ctx, r->loans[s], err);
	rx_release(&r->pub);
}

/* The meta is in: place the segments (lent or in one block of ours). */
static int rx_place(struct psl_van *v, struct inconn *c)
{
	struct rxmsg *r = c->rx;
	bool can_ask = v->host->size >= PSL_VAN_HOST_SIZE_1_1 && v->host->recv_dest;
	size_t own = 0, off = 0;
	uint32_t s;

	for (s = 0; s < r->pub.nseg; s++) {
		struct psl_van_dest d;
		r->segs[s] = (struct psl_van_rseg){NULL, r->lens[s], PSL_MEM_HOST, -1};
		if (can_ask && r->lens[s] >= DEST_MIN &&
		    v->host->recv_dest(v->host->ctx, c->sender, r->meta, r->pub.meta_len, s,
				       r->lens[s], &d) == 0) {
			r->loans[s] = d.loan;
			if (d.mem_type == PSL_MEM_HOST) {
				r->segs[s].data = d.data;
				continue;
			}
			/* sockets cannot write device memory: give it back */
			v->host->recv_dest_put(v->host->ctx, d.loan, -ENOTSUP);
			r->loans[s] = NULL;
		}
		own += (r->lens[s] + 63) & ~(size_t)63;
	}
	if (own && !(r->data = malloc(own)))
		return -ENOMEM;
	for (s = 0; s < r->pub.nseg; s++)
		if (!r->lens[s])
			r->segs[s].data = r->meta; /* valid, and nothing to read */
		else if (!r->segs[s].data) {
			r->segs[s].data = (char *)r->data + off;
			off += (r->lens[s] + 63) & ~(size_t)63;
		}
	return 0;
}

/* Where the next bytes of c go, and how many; NULL when the message is
 * complete. */
static void *rx_target(struct inconn *c, size_t *want)
{
	struct rxmsg *r = c->rx;
	if (c->part == 0) {
		*want = 16;
		return c->hdr;
	}
	if (c->part == -1) {
		*want = sizeof(c->proof);
		return c->proof;
	}
	if (c->part == 1) {
		*want = 8 * (size_t)r->pub.nseg;
		return r->lens;
	}
	if (c->part == 2) {
		*want = r->pub.meta_len;
		return r->meta;
	}
	while ((uint32_t)(c->part - 3) < r->pub.nseg) {
		struct psl_van_rseg *s = &r->segs[c->part - 3];
		if (s->len) {
			*want = s->len;
			return s->data;
		}
		c->part++;
	}
	return NULL;
}

/* A part of c's current frame is complete; returns -errno to close c. */
static int rx_part_done(struct psl_van *v, struct inconn *c)
{
	uint32_t s;
	if (c->part == 0) {
		uint32_t kind = psl_van_get_le32(c->hdr + 4), a = psl_van_get_le32(c->hdr + 8);
		uint32_t b = psl_van_get_le32(c->hdr + 12);
		if (psl_van_get_le32(c->hdr) != MAGIC)
			return -EPROTO;
		if (kind == K_HELLO && b == PSL_VAN_PROOF_LEN) {
			c->claimed = (int32_t)a;
			c->part = -1; /* its proof next */
			return 0;
		}
		if (kind == K_HELLO && b == 0 && !v->secret) {
			c->sender = (int32_t)a;
			return 0; /* the next header */
		}
		if (kind == K_HELLO) {
			LOG(v, PSL_VAN_LOG_WARN,
			    "closed a connection whose hello (as node %d) proves no PS_JOB_SECRET "
			    "(a stranger, or a node with another secret or none)",
			    (int32_t)a);
			return -EACCES;
		}
		if (kind != K_MSG || a > MAX_META || b > MAX_SEGS)
			return -EPROTO;
		if (v->secret && !c->proven)
			return -EACCES; /* (the hello said so already) */
		c->rx = calloc(1, sizeof(*c->rx) + a);
		if (!c->rx)
			return -ENOMEM;
		c->rx->pub.sender = c->sender;
		c->rx->pub.nseg = b;
		c->rx->pub.meta = c->rx->meta;
		c->rx->pub.meta_len = a;
		c->rx->pub.segs = c->rx->segs;
		c->rx->pub.release = rx_release;
		c->part = 1;
		return 0;
	}
	if (c->part == -1) {
		c->part = 0;
		if (!v->secret || psl_van_proof_check(v->host, VAN_NAME, c->claimed, c->proof) ||
		    !psl_van_nonce_fresh(&v->nonces, c->proof)) {
			LOG(v, PSL_VAN_LOG_WARN,
			    "closed a connection whose hello (as node %d) proves %s", c->claimed,
			    v->secret ? "no PS_JOB_SECRET this node has (a stranger, or a node "
					"with another secret or none)"
				      : "a PS_JOB_SECRET, and this node has none: give every "
					"node the same PS_JOB_SECRET");
			return -EACCES;
		}
		c->sender = c->claimed;
		c->proven = true;
		return 0;
	}
	if (c->part == 1) {
		for (s = 0; s < c->rx->pub.nseg; s++) {
			c->rx->lens[s] = psl_van_get_le64(&c->rx->lens[s]);
			if (c->rx->lens[s] > ((uint64_t)1 << 40))
				return -EPROTO;
		}
		c->part = 2;
		return 0;
	}
	if (c->part == 2) {
		c->part = 3;
		return rx_place(v, c);
	}
	c->part++; /* a segment */
	return 0;
}

/* Reads what c has; delivers complete messages. -errno: close c. */
static int rx_read(struct psl_van *v, struct inconn *c)
{
	int reads = 0; /* up to 64 reads, then the other connections' turn */
	for (;;) {
		size_t want;
		void *to = rx_target(c, &want);
		ssize_t n;
		int rc;
		if (!to) { /* complete: loans back, then the message to the core */
			struct rxmsg *r = c->rx;
			uint32_t s;
			for (s = 0; s < r->pub.nseg; s++)
				if (r->loans[s]) {
					v->host->recv_dest_put(v->host->ctx, r->loans[s], 0);
					r->loans[s] = NULL;
				}
			c->rx = NULL;
			c->part = 0;
			c->got = 0;
			v->delivered++;
			v->host->recv(v->host->ctx, &r->pub); /* the core owns it now */
			continue;
		}
		if (want == 0) { /* an empty part (no segments, no meta) */
			if ((rc = rx_part_done(v, c)))
				return rc;
			continue;
		}
		if (++reads > 64)
			return 0; /* (poll says when there is more) */
		n = recv(c->fd, (char *)to + c->got, want - c->got, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		c->got += (size_t)n;
		if (c->got < want)
			continue;
		c->got = 0;
		if ((rc = rx_part_done(v, c)))
			return rc;
	}
}

static void accept_all(struct psl_van *v)
{
	char greet[PSL_VAN_GREETING_LEN_MAX];
	size_t glen = psl_van_greeting_build(greet, sizeof(greet), VAN_NAME);
	int fd, one = 1;
	while ((fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct inconn *c = calloc(1, sizeof(*c));
		/* van.h: who listens greets first, so that a peer of another van
		 * can tell at once (a fresh socket takes these few bytes) */
		if (!c || send(fd, greet, glen, MSG_NOSIGNAL) != (ssize_t)glen) {
			free(c);
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		c->sender = PSL_VAN_ID_NONE;
		c->next = v->fresh; /* whoever reads next takes it (take_fresh) */
		v->fresh = c;
	}
}

/* Moves the accepted connections into the list that is read (rx_mu held). */
static void take_fresh(struct psl_van *v)
{
	struct inconn *c;
	pthread_mutex_lock(&v->mu);
	while ((c = v->fresh)) {
		v->fresh = c->next;
		c->next = v->in;
		v->in = c;
	}
	pthread_mutex_unlock(&v->mu);
}

/* Reads the incoming connections poll found ready; closes those that failed
 * (rx_mu held; who[i] names what pf[i] polls). */
static void read_ready(struct psl_van *v, const struct pollfd *pf, void *const *who, size_t n)
{
	struct inconn *ic, **pic;
	size_t i;
	for (pic = &v->in; (ic = *pic);) {
		int rc = 0;
		for (i = 0; i < n; i++)
			if (who[i] == ic && pf[i].fd == ic->fd && pf[i].revents)
				rc = rx_read(v, ic);
		if (rc) {
			if (rc != -ECONNRESET || ic->part != 0)
				LOG(v, PSL_VAN_LOG_DEBUG, "closing the connection from node %d: %s",
				    ic->sender, strerror(-rc));
			*pic = ic->next;
			rx_drop(v, ic->rx, rc);
			close(ic->fd);
			free(ic);
			continue;
		}
		pic = &ic->next;
	}
}

/* ---------------------------------------------------------- the thread -- */

/* Calls send_done and peer_event for what the last round produced. */
static void report(struct psl_van *v)
{
	struct sendrec *d;
	struct event *e;
	pthread_mutex_lock(&v->mu);
	d = v->done;
	v->done = NULL;
	e = v->evs;
	v->evs = NULL;
	v->evtail = &v->evs;
	pthread_mutex_unlock(&v->mu);
	while (d) {
		struct sendrec *n = d->next;
		if (d->cookie)
			v->host->send_done(v->host->ctx, d->cookie, d->status);
		free(d);
		d = n;
	}
	while (e) {
		struct event *n = e->next;
		v->host->peer_event(v->host->ctx, e->id, e->ev, e->err, e->detail);
		free(e);
		e = n;
	}
}

/* Room for one more entry in the poll set. */
static bool grow(struct pollfd **pf, void ***who, size_t *cap, size_t n)
{
	size_t nc = *cap ? 2 * *cap : 64;
	struct pollfd *p;
	void **w;
	if (n < *cap)
		return true;
	if (!(p = realloc(*pf, nc * sizeof(*p))))
		return false;
	*pf = p;
	if (!(w = realloc(*who, nc * sizeof(*w))))
		return false;
	*who = w;
	*cap = nc;
	return true;
}

/* The van whose callbacks run on this thread now (our thread: always): a
 * callback that waits must not call progress() inside them. */
static __thread struct psl_van *reading;

/* Adds the incoming connections to the thread's poll set (as pf[*n] on),
 * unless callers read them now (progress()): then it caps *timeout (ms) to
 * the rest of their window, and returns false. */
static bool poll_in(struct psl_van *v, struct pollfd **pf, void ***who, size_t *cap, size_t *n,
		    int64_t *timeout)
{
	int64_t left = atomic_load(&v->aside_until) - psl_van_now_ns();
	struct inconn *ic;
	if (left > 0 || pthread_mutex_trylock(&v->rx_mu)) {
		int64_t ms = left > 0 ? (left + 999999) / 1000000 : 1;
		if (*timeout > ms)
			*timeout = ms;
		return false;
	}
	take_fresh(v);
	for (ic = v->in; ic; ic = ic->next) {
		if (!grow(pf, who, cap, *n))
			break;
		(*pf)[*n] = (struct pollfd){ic->fd, POLLIN, 0}, (*who)[(*n)++] = ic;
	}
	pthread_mutex_unlock(&v->rx_mu);
	return true;
}

static void *thread_main(void *arg)
{
	struct psl_van *v = arg;
	struct pollfd *pf = NULL;
	void **who = NULL;
	size_t cap = 0;

	reading = v;
	for (;;) {
		struct outconn *c, **pc;
		size_t n = 0, i;
		int64_t now = psl_van_now_ms(), timeout = 1000;
		bool queued = false, in;

		pthread_mutex_lock(&v->mu);
		for (pc = &v->out; (c = *pc);) { /* close replaced connections */
			if (c->retired) {
				*pc = c->next;
				set_down(v, c, -ECANCELED, false);
				free(c);
				continue;
			}
			pc = &c->next;
		}
		for (c = v->out; c; c = c->next) {
			if (c->state == C_WAIT && now >= c->retry_at)
				start_connect(v, c);
			if (c->state == C_GREET && now >= c->greet_by) {
				event(v, c->id, PSL_VAN_PEER_MISMATCH, -ETIMEDOUT,
				      "%s:%d sent no greeting in %d s", c->host, c->port,
				      GREET_MS / 1000);
				set_down(v, c, -ETIMEDOUT, false);
			}
			queued |= c->q != NULL && c->state != C_DOWN;
		}
		if (v->stopping && (!queued || now >= v->linger_until)) {
			pthread_mutex_unlock(&v->mu);
			break;
		}
		if (!grow(&pf, &who, &cap, 1)) { /* room for the first two */
			pthread_mutex_unlock(&v->mu);
			LOG(v, PSL_VAN_LOG_ERROR, "out of memory");
			poll(NULL, 0, 100);
			continue;
		}
		pf[n] = (struct pollfd){v->wake_fd, POLLIN, 0}, who[n++] = NULL;
		if (v->listen_fd >= 0)
			pf[n] = (struct pollfd){v->listen_fd, POLLIN, 0}, who[n++] = v;
		for (c = v->out; c; c = c->next) {
			short want = c->state == C_CONNECTING ? POLLOUT
				     : c->state == C_GREET    ? POLLIN
				     : c->state == C_UP ? (short)(POLLIN | (c->q ? POLLOUT : 0))
							: 0;
			if (c->state == C_WAIT && c->retry_at - now < timeout)
				timeout = c->retry_at - now > 0 ? c->retry_at - now : 0;
			if (!want)
				continue;
			if (!grow(&pf, &who, &cap, n))
				break; /* out of memory: the rest waits a round */
			pf[n] = (struct pollfd){c->fd, want, 0}, who[n++] = c;
		}
		pthread_mutex_unlock(&v->mu);
		in = poll_in(v, &pf, &who, &cap, &n, &timeout);
		if (v->stopping && timeout > 10)
			timeout = 10;
		if (poll(pf, n, (int)timeout) < 0 && errno != EINTR)
			LOG(v, PSL_VAN_LOG_ERROR, "poll: %s", strerror(errno));

		pthread_mutex_lock(&v->mu);
		for (i = 0; i < n; i++) {
			if (!pf[i].revents)
				continue;
			if (who[i] == NULL) {
				uint64_t x;
				if (read(v->wake_fd, &x, sizeof(x)) < 0 && errno != EAGAIN)
					LOG(v, PSL_VAN_LOG_WARN, "eventfd: %s", strerror(errno));
			} else if (who[i] == v) {
				accept_all(v);
			} else {
				for (c = v->out; c && (void *)c != who[i]; c = c->next)
					;
				if (c && c->fd == pf[i].fd)
					out_ready(v, c, pf[i].revents);
			}
		}
		for (c = v->out; c; c = c->next) /* what came since the poll */
			if (c->state == C_UP && c->q)
				write_out(v, c);
		pthread_mutex_unlock(&v->mu);
		report(v);
		/* a caller that took rx_mu since the poll reads them itself */
		if (in && !pthread_mutex_trylock(&v->rx_mu)) {
			read_ready(v, pf, who, n);
			pthread_mutex_unlock(&v->rx_mu);
		}
	}
	free(pf);
	free(who);
	return NULL;
}

/* ---------------------------------------------- caller-driven progress -- */

/*
 * progress() (ABI 1.3; the core calls it with PS_CALLER_PROGRESS=1): a
 * thread that waits for a reply reads the incoming connections itself, so
 * that the reply reaches host->recv on that thread, without a wake-up of
 * ours and a hand-off back. Only the reading moves: connecting, accepting,
 * writing and lost peers stay with our thread.
 *
 * The rules: one reader at a time (rx_mu, by trylock: a caller that never
 * gets it returns -EBUSY and the core sleeps as usual); our thread leaves
 * the incoming sockets out of its poll until ASIDE_NS after the last
 * caller's window ends (else it would wake for the very reply the caller
 * reads), and then reads them again, so nothing waits longer than that for a
 * caller that went away.
 */

/* One pass: waits up to wait_ns for the incoming sockets, reads what came
 * (rx_mu held). Returns how many messages it delivered. */
static int drive_once(struct psl_van *v, int64_t wait_ns)
{
	struct timespec ts = {wait_ns / 1000000000, wait_ns % 1000000000};
	unsigned long before = v->delivered;
	struct inconn *ic;
	size_t n = 0;

	take_fresh(v);
	for (ic = v->in; ic; ic = ic->next) {
		if (!grow(&v->cpf, &v->cwho, &v->ccap, n))
			break;
		v->cpf[n] = (struct pollfd){ic->fd, POLLIN, 0}, v->cwho[n++] = ic;
	}
	if (ppoll(v->cpf, n, &ts, NULL) > 0)
		read_ready(v, v->cpf, v->cwho, n);
	return v->delivered - before > 1000 ? 1000 : (int)(v->delivered - before);
}

static int ex_progress(struct psl_van *v, int timeout_us)
{
	int64_t now = psl_van_now_ns(), end = now + (int64_t)(timeout_us > 0 ? timeout_us : 0) * 1000;
	int rc;

	if (reading == v)
		return -EDEADLK; /* from one of our callbacks: a round inside a round */
	pthread_mutex_lock(&v->mu);
	rc = v->stopping ? -ESHUTDOWN : v->listen_fd < 0 ? -ENOTCONN : 0;
	pthread_mutex_unlock(&v->mu);
	if (rc)
		return rc;
	atomic_store(&v->aside_until, end + ASIDE_NS); /* our thread steps aside */
	for (;;) {
		if (!pthread_mutex_trylock(&v->rx_mu)) {
			reading = v;
			rc = drive_once(v, end > now ? end - now : 0);
			reading = NULL;
			pthread_mutex_unlock(&v->rx_mu);
		} else {
			rc = -EBUSY; /* another caller reads */
			sched_yield();
		}
		now = psl_van_now_ns();
		if (rc > 0 || now >= end)
			return rc;
	}
}

/* ---------------------------------------------------------- operations -- */

static int ex_init(const struct psl_van_host *host, struct psl_van **out)
{
	struct psl_van *v;
	long connect_s, linger_ms;
	int rc;

	/* settings first: a bad value is one ERROR line naming it, and -EINVAL */
	if ((rc = psl_van_param_long(host, VAN_NAME, "PS_CONNECT_TIMEOUT", 60, 1, 86400, "seconds",
				     &connect_s)) ||
	    (rc = psl_van_param_long(host, VAN_NAME, "PS_EXAMPLE_LINGER_MS", 1000, 0, 600000,
				     "milliseconds", &linger_ms)))
		return rc;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->host = host;
	v->secret = psl_van_secret(host);
	v->connect_ms = connect_s * 1000;
	v->linger_ms = linger_ms;
	v->listen_fd = -1;
	v->evtail = &v->evs;
	pthread_mutex_init(&v->mu, NULL);
	pthread_mutex_init(&v->rx_mu, NULL);
	v->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (v->wake_fd < 0 || (rc = -pthread_create(&v->thread, NULL, thread_main, v))) {
		rc = rc ? rc : -errno;
		if (v->wake_fd >= 0)
			close(v->wake_fd);
		pthread_mutex_destroy(&v->mu);
		pthread_mutex_destroy(&v->rx_mu);
		free(v);
		return rc;
	}
	v->running = true;
	*out = v;
	return 0;
}

static int ex_bind(struct psl_van *v, const struct psl_van_bind_req *req,
		   struct psl_van_bind_res *res)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE},
			*ai = NULL;
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	char port[16];
	int fd, one = 1, rc;

	snprintf(port, sizeof(port), "%d", req->port > 0 ? req->port : 0);
	rc = getaddrinfo(req->host && *req->host ? req->host : NULL, port, &hints, &ai);
	if (rc || !ai) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot bind to %s: %s", req->host, gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return -errno;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		rc = -errno;
		freeaddrinfo(ai);
		close(fd);
		return rc;
	}
	freeaddrinfo(ai);
	res->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
						   : ((struct sockaddr_in *)&sa)->sin_port);
	res->addr_len = 0; /* peers reach us by host and port alone */
	pthread_mutex_lock(&v->mu);
	if (v->listen_fd >= 0)
		close(v->listen_fd);
	v->listen_fd = fd;
	pthread_mutex_unlock(&v->mu);
	wake(v);
	LOG(v, PSL_VAN_LOG_INFO, "listening on %s:%d", req->host, res->port);
	return 0;
}

static void ex_fini(struct psl_van *v)
{
	struct outconn *c;
	struct inconn *ic;

	pthread_mutex_lock(&v->mu);
	v->stopping = true; /* the thread writes what is queued, for a while */
	v->linger_until = psl_van_now_ms() + v->linger_ms;
	pthread_mutex_unlock(&v->mu);
	wake(v);
	if (v->running)
		pthread_join(v->thread, NULL);
	/* the thread is gone: what is still queued fails, before we return */
	while ((c = v->out)) {
		v->out = c->next;
		set_down(v, c, -ECANCELED, false);
		free(c);
	}
	while (v->evs) { /* events of the last moments: nobody listens now */
		struct event *e = v->evs;
		v->evs = e->next;
		free(e);
	}
	v->evtail = &v->evs;
	report(v); /* the last send_done calls */
	pthread_mutex_lock(&v->rx_mu); /* after a caller's pass in flight */
	take_fresh(v);
	while ((ic = v->in)) {
		v->in = ic->next;
		rx_drop(v, ic->rx, -ECANCELED);
		close(ic->fd);
		free(ic);
	}
	pthread_mutex_unlock(&v->rx_mu);
	if (v->listen_fd >= 0)
		close(v->listen_fd);
	close(v->wake_fd);
	pthread_mutex_destroy(&v->mu);
	pthread_mutex_destroy(&v->rx_mu);
	free(v->cpf);
	free(v->cwho);
	free(v);
}

static int ex_query(struct psl_van *v, struct psl_van_caps *caps)
{
	(void)v;
	caps->flags = PSL_VAN_CAP_MEM_HOST | PSL_VAN_CAP_ZC_SEND;
	caps->max_msg_size = 0;
	snprintf(caps->transports, sizeof(caps->transports),
		 "tcp (plain sockets, one thread, poll)");
	return 0;
}

static const struct psl_van_ops example_ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = VAN_NAME,
	.version = "van_" VAN_NAME " " VAN_VERSION,
	.description = "the example van: plain TCP sockets, one thread",
	.init = ex_init,
	.fini = ex_fini,
	.query = ex_query,
	.bind = ex_bind,
	.connect = ex_connect,
	.disconnect = ex_disconnect,
	.send = ex_send,
	.progress = ex_progress, /* optional: see "caller-driven progress" */
};

PSL_VAN_DEFINE_ENTRY(example_ops)
