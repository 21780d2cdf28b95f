/*
 * van_zmq: ZeroMQ over TCP, speaking ps-lite's byteps-branch protocol
 * (docs/wire.md section 2): one ROUTER per node that every peer's DEALER
 * connects to, DEALERs with identity "ps<id>" (anonymous while registering),
 * frames [meta][data...], received as [identity][meta][data...].
 *
 * Threads: one receive thread blocks in poll(2) on the ROUTER's ZMQ_FD, on
 * each DEALER's ZMQ_FD (a C++ ps-lite server answers a worker through its ROUTER,
 * which arrives on the worker's DEALER), on each DEALER's monitor socket (to
 * tell the core when a peer is reached or lost) and on an eventfd. Senders
 * use the DEALERs from any thread under a per-peer mutex. Nothing spins
 * unless PS_BUSY_POLL=1. With PS_CALLER_PROGRESS=1 a thread waiting for an
 * answer reads the ROUTER itself, and the receive thread leaves it to such
 * callers while they come (zmq_progress.c).
 *
 * PS_BUSY_POLL=1 (servers and workers; a scheduler never polls): after each
 * message the receive thread keeps polling, yielding the CPU between polls,
 * for PS_BUSY_POLL_US (200) microseconds before it blocks again. A message
 * crosses three threads each way in libzmq (sender, sender's io thread,
 * receiver's io thread, receiver), and on a small machine each sleeping
 * thread costs a wake-up; the window saves the last one while traffic flows,
 * and an idle node still sleeps. Polling without yielding starved libzmq's
 * io threads on two cores (milliseconds per round trip), so it yields.
 * Even yielding, the polling thread holds a CPU that the process's io
 * threads and its caller need for the message to reach it at all, and a
 * thread that yields is charged a whole slice each time (EEVDF), so that
 * where other threads want the CPUs its next wake-up waits a tick (4 ms).
 * Where the process may run on fewer CPUs than PS_ZMQ_BUSY_POLL_MIN_CPUS
 * (default: its io threads + 2, one for the polling thread and one for the
 * caller) it does not poll, and says so at INFO (docs/performance.md: on 2
 * cores polling made a 4 KiB round trip slower than sleeping as soon as
 * another thread wanted a CPU, though 35% faster on a quiet machine).
 *
 * Identities: the ROUTER hands an identity "ps<id>" to its newest connection
 * (ZMQ_ROUTER_HANDOVER), so that a stranger who claimed a peer's identity
 * first cannot lock the real peer out; the receive thread remembers which
 * connection (file descriptor and address) each identity came from, and when
 * an identity moves to a new connection while the old one is still open, it
 * says so and closes the old one, so that the peer on it learns at once (its
 * van reports the connection lost) instead of sending into the void.
 *
 * Job secret (PS_JOB_SECRET, docs/security.md): each DEALER's identity is
 * "ps<id>:<nonce>:<proof>" ("ps:<nonce>:<proof>" while registering), the
 * proof HMAC-SHA256 under the secret (computed by the core, van ABI 1.2)
 * of "pslite-zmq|<id>|<nonce>", the nonce 16 random bytes of that
 * connection; the ROUTER drops every message whose identity does not prove
 * the secret. Nobody who lacks the secret can then claim a node's identity,
 * and a random nonce per connection cannot be claimed first. Without a
 * secret the identities are ps-lite's.
 *
 * Lost peers: libzmq keeps what was sent to a peer in the DEALER's queue
 * until it comes back, and frees a zero-copy frame (send_done) only then.
 * When a peer is lost (or speaks another van), its connection is dropped
 * with linger 0, so that libzmq lets go of those frames at once; those
 * sends complete with the error, later ones fail until a handshake with it
 * succeeds again (pslite-vantest --strict). A send's outcome waits for the
 * handshake: libzmq writes to a peer of another van too (as ZMTP 1.0).
 *
 * Bounds: each connection queues at most PS_ZMQ_RCVHWM messages on receive
 * (then TCP pushes back), and a frame (the meta or a segment) larger than
 * PS_ZMQ_MAX_MSG_MB closes the connection it came on (ZMQ_MAXMSGSIZE);
 * sending one is an error naming the setting.
 */

#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include <pslite/van.h>
#include <pslite/van_util.h>

#include "zmq_van.h"

#define VAN "zmq"
#define MAX_FRAMES 64 /* meta + data frames of one message */
#define STR2(x) #x
#define STR(x) STR2(x)

#define LOG(v, lvl, ...) psl_van_log((v)->host, (lvl), "van_zmq", __VA_ARGS__)

struct zpeer {
	int id;
	void *sock; /* DEALER */
	void *mon;  /* PAIR reading the DEALER's monitor events (receive thread) */
	int mon_fd; /* its ZMQ_FD */
	int fd;	    /* the DEALER's ZMQ_FD */
	pthread_mutex_t mu;
	atomic_bool rx_pending; /* a sender saw input waiting on the DEALER */
	bool up;
	bool tcp_connected; /* TCP is up, the ZMTP handshake not (yet) */
	bool mismatch_told;
	bool drop; /* disconnected (the node is lost): close with linger 0 */
	int lost;	    /* -errno while the peer is lost (sends fail), else 0 */
	struct zlink *link; /* what the sends queued now complete with */
	char host[64];
	int port;
	char endpoint[128];
	struct zpeer *next; /* graveyard */
};

/* The connection an identity "ps<id>" last came from (ROUTER, receive
 * thread only); fd 0 = none seen yet. */
#define MAX_TRACKED_ID 4096
struct zrid {
	int fd;
	unsigned char ok[128]; /* the last identity whose proof was checked */
	size_t ok_len;
	bool early; /* first seen before this node connected to that id */
	char peer[72];
	int ghost_fd; /* a lost node's connection from another host, left open */
};

/* One received message: the frames stay alive until the core releases it. */
struct zrmsg {
	struct psl_van_rmsg pub;
	uint32_t nframes;
	zmq_msg_t *frames;
	struct psl_van_rseg *segs;
};

/* Records of received messages of up to POOL_FRAMES frames (a KV message:
 * meta, keys, values, lens) are kept for reuse, process-wide (a record may
 * be released after its van is gone), at most 256 of them: steady traffic
 * allocates none. */
#define POOL_FRAMES 4
#define POOL_BYTES                                                                  \
	(sizeof(struct zrmsg) + POOL_FRAMES * sizeof(zmq_msg_t) +                   \
	 POOL_FRAMES * sizeof(struct psl_van_rseg))
static struct psl_van_cache pool = PSL_VAN_CACHE_INIT(256, POOL_BYTES);

/* The bytes of a record of n frames (up to POOL_FRAMES: one size, kept) */
static size_t zrmsg_bytes(uint32_t n)
{
	return n <= POOL_FRAMES ? POOL_BYTES
				: sizeof(struct zrmsg) + n * sizeof(zmq_msg_t) +
					  n * sizeof(struct psl_van_rseg);
}

static struct zrmsg *zrmsg_get(uint32_t n)
{
	struct zrmsg *r = psl_van_cache_get(&pool, zrmsg_bytes(n));
	if (!r)
		return NULL;
	r->frames = (zmq_msg_t *)(r + 1);
	r->segs = (struct psl_van_rseg *)(r->frames + (n <= POOL_FRAMES ? POOL_FRAMES : n));
	r->nframes = n;
	return r;
}

static void zrmsg_put(struct zrmsg *r)
{
	psl_van_cache_put(&pool, r, zrmsg_bytes(r->nframes));
}

/* The outcome of the sends queued on one connection of a DEALER, shared by
 * their trackers. Until it is known (LINK_OPEN: no ZMTP handshake seen yet,
 * or the connection is being torn down) a send whose frames libzmq let go
 * of waits here: libzmq also writes to a peer that is no ZeroMQ node (it
 * takes it for ZMTP 1.0), and drops what it queued when the connection is
 * lost. Then 0 (the handshake succeeded) or the -errno it was lost with. */
#define LINK_OPEN 1
struct zlink {
	atomic_int refs;
	atomic_int err; /* LINK_OPEN, 0 or -errno; changed under mu */
	pthread_mutex_t mu;
	struct ztrack *waiting;
};

/* Counts the zero-copy frames of one send still held by libzmq. */
struct ztrack {
	atomic_int refs;
	void *cookie;
	const struct psl_van_host *host;
	struct zlink *link;
	struct ztrack *next; /* waiting on its link */
};

static struct zlink *link_new(void)
{
	struct zlink *l = malloc(sizeof(*l));
	if (l) {
		atomic_init(&l->refs, 1);
		atomic_init(&l->err, LINK_OPEN);
		pthread_mutex_init(&l->mu, NULL);
		l->waiting = NULL;
	}
	return l;
}

static void link_put(struct zlink *l)
{
	if (l && atomic_fetch_sub(&l->refs, 1) == 1) {
		pthread_mutex_destroy(&l->mu);
		free(l);
	}
}

/* libzmq let go of every frame of t's send: send_done with status err. */
static void track_done(struct ztrack *t, int err)
{
	link_put(t->link);
	t->host->send_done(t->host->ctx, t->cookie, err);
	free(t);
}

/* Sets l's outcome (LINK_OPEN: unknown again) and completes the sends that
 * waited for it. Never with the peer's mu held: send_done may send. */
static void link_settle(struct zlink *l, int err)
{
	struct ztrack *t;
	pthread_mutex_lock(&l->mu);
	atomic_store(&l->err, err);
	t = err == LINK_OPEN ? NULL : l->waiting;
	if (t)
		l->waiting = NULL;
	pthread_mutex_unlock(&l->mu);
	while (t) {
		struct ztrack *n = t->next;
		track_done(t, err);
		t = n;
	}
}

void zv_wake(struct psl_van *v)
{
	uint64_t one = 1;
	ssize_t rc = write(v->wake_fd, &one, sizeof(one));
	(void)rc;
}

/* "ps<digits>" -> id; anything else is an anonymous peer (docs/wire.md 2.1). */
static int parse_identity(const unsigned char *s, size_t n)
{
	size_t i;
	int id = 0;
	if (n <= 2 || n > 8 || s[0] != 'p' || s[1] != 's')
		return PSL_VAN_ID_NONE;
	for (i = 2; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return PSL_VAN_ID_NONE;
		id = id * 10 + (s[i] - '0');
	}
	return id;
}

static void hexs(const uint8_t *d, size_t n, char *out)
{
	static const char x[] = "0123456789abcdef";
	size_t i;
	for (i = 0; i < n; i++) {
		out[2 * i] = x[d[i] >> 4];
		out[2 * i + 1] = x[d[i] & 15];
	}
	out[2 * n] = 0;
}

/* The identity of a DEALER of node my_id (PSL_VAN_ID_NONE: registering)
 * into out; returns its length, 0 for none (anonymous), or -errno. */
static int make_identity(struct psl_van *v, int my_id, char *out, size_t len)
{
	uint8_t nonce[16], mac[32];
	char nh[33], mh[65], idp[16] = "", msg[80];
	size_t got = 0;
	if (my_id != PSL_VAN_ID_NONE)
		snprintf(idp, sizeof(idp), "%d", my_id);
	if (!v->secret)
		return idp[0] ? snprintf(out, len, "ps%s", idp) : 0;
	while (got < sizeof(nonce)) {
		ssize_t k = getrandom(nonce + got, sizeof(nonce) - got, 0);
		if (k < 0 && errno != EINTR)
			return -errno;
		if (k > 0)
			got += (size_t)k;
	}
	hexs(nonce, sizeof(nonce), nh);
	snprintf(msg, sizeof(msg), "pslite-zmq|%s|%s", idp, nh);
	if (v->host->proof(v->host->ctx, msg, strlen(msg), mac))
		return -EACCES;
	hexs(mac, sizeof(mac), mh);
	return snprintf(out, len, "ps%s:%s:%s", idp, nh, mh);
}

static int unhex(const unsigned char *s, size_t n, uint8_t *out)
{
	size_t i;
	for (i = 0; i < 2 * n; i++) {
		unsigned char c = s[i];
		int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (x < 0)
			return -1;
		if (i % 2 == 0)
			out[i / 2] = (uint8_t)(x << 4);
		else
			out[i / 2] |= (uint8_t)x;
	}
	return 0;
}

/* With a secret: the sender an identity "ps<id>:<nonce>:<proof>" proves,
 * PSL_VAN_ID_NONE for "ps:...", or -1 when it proves nothing. */
static int proven_identity(struct psl_van *v, const unsigned char *s, size_t n)
{
	size_t i = 2, d;
	int id = 0;
	uint8_t mac[32];
	char msg[80];
	struct zrid *r = NULL;
	if (n < 3 || s[0] != 'p' || s[1] != 's')
		return -1;
	while (i < n && i < 8 && s[i] >= '0' && s[i] <= '9')
		id = id * 10 + (s[i++] - '0');
	d = i - 2;
	if (n != i + 1 + 32 + 1 + 64 || s[i] != ':' || s[i + 33] != ':')
		return -1;
	if (!d)
		id = PSL_VAN_ID_NONE;
	else if (id < MAX_TRACKED_ID && v->rid)
		r = &v->rid[id];
	if (r && r->ok_len == n && !memcmp(r->ok, s, n))
		return id;
	if (unhex(s + i + 34, 32, mac) || unhex(s + i + 1, 16, (uint8_t[16]){0}))
		return -1;
	snprintf(msg, sizeof(msg), "pslite-zmq|%.*s|%.32s", (int)d, (const char *)s + 2,
		 (const char *)s + i + 1);
	if (v->host->proof_check(v->host->ctx, msg, strlen(msg), mac))
		return -1;
	if (r && n <= sizeof(r->ok)) {
		memcpy(r->ok, s, n);
		r->ok_len = n;
	}
	return id;
}

/* ---------------------------------------------------------------- send -- */

static void zfree(void *data, void *hint)
{
	struct ztrack *t = hint;
	(void)data;
	struct zlink *l = t->link;
	int err;
	if (atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	err = l ? atomic_load(&l->err) : 0;
	if (err == LINK_OPEN) {
		pthread_mutex_lock(&l->mu);
		err = atomic_load(&l->err);
		if (err == LINK_OPEN) {
			t->next = l->waiting;
			l->waiting = t;
		}
		pthread_mutex_unlock(&l->mu);
		if (err == LINK_OPEN)
			return;
	}
	track_done(t, err);
}

static int send_frame(zmq_msg_t *m, void *sock, int flags)
{
	for (;;) {
		if (zmq_msg_send(m, sock, flags) >= 0)
			return 0;
		if (errno != EINTR) {
			int e = errno;
			zmq_msg_close(m);
			return -e;
		}
	}
}

static struct zpeer *peer_get(struct psl_van *v, int id)
{
	return (id >= 0 && id < v->npeers) ? v->peers[id] : NULL;
}

/* A tracked send's frames up to this size are copied: cheaper than having
 * libzmq tell when it let go of them. Their send still completes only once
 * the connection's outcome is known (struct zlink). */
#define COPY_MAX 1024

/* Whether segment s of a send with cookie goes as it is and is tracked. */
static bool tracked(const struct psl_van_seg *s, void *cookie)
{
	return cookie && s->len > COPY_MAX;
}

/* The data frame of segment s: copied, tracked by t, or constant. */
static void frame_init(zmq_msg_t *m, const struct psl_van_seg *s, void *cookie,
		       struct ztrack *t)
{
	if (!s->len) {
		zmq_msg_init(m);
	} else if (!tracked(s, cookie) && cookie) {
		zmq_msg_init_size(m, s->len);
		memcpy(zmq_msg_data(m), s->data, s->len);
	} else if (t) {
		zmq_msg_init_data(m, (void *)s->data, s->len, zfree, t);
	} else { /* constant message: no copy, no allocation, no callback */
		zmq_msg_init_data(m, (void *)s->data, s->len, NULL, NULL);
	}
}

static struct ztrack *track_new(struct psl_van *v, void *cookie, int refs)
{
	struct ztrack *t = malloc(sizeof(*t));
	if (t) {
		atomic_init(&t->refs, refs);
		t->cookie = cookie;
		t->host = v->host;
		t->link = NULL;
	}
	return t;
}

static int zsend(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		 const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	struct ztrack *t = NULL;
	struct zpeer *p;
	zmq_msg_t m;
	uint32_t i, zc = 0, copied = 0;
	int rc, ev = 0;
	size_t evlen = sizeof(ev);

	if ((int64_t)meta_len > v->max_msg) {
		/* the receiver's ZMQ_MAXMSGSIZE would close the connection */
		LOG(v, PSL_VAN_LOG_ERROR,
		    "cannot send a meta of %zu bytes to node %d: larger than PS_ZMQ_MAX_MSG_MB=%g "
		    "MiB (%lld bytes), the largest frame a node takes; raise it on every node",
		    meta_len, id, (double)v->max_msg / (1 << 20), (long long)v->max_msg);
		return -EMSGSIZE;
	}
	for (i = 0; i < nseg; i++) {
		if (segs[i].mem_type != PSL_MEM_HOST) {
			LOG(v, PSL_VAN_LOG_ERROR,
			    "cannot send a GPU buffer (segment %u): the zmq van carries host "
			    "memory only; use a van with CUDA support (ucx)",
			    i);
			return -EINVAL;
		}
		zc += tracked(&segs[i], cookie);
		copied += segs[i].len && !tracked(&segs[i], cookie);
		if ((int64_t)segs[i].len > v->max_msg) {
			LOG(v, PSL_VAN_LOG_ERROR,
			    "cannot send segment %u of %zu bytes to node %d: larger than "
			    "PS_ZMQ_MAX_MSG_MB=%g MiB, the largest frame a node takes; raise it on "
			    "every node",
			    i, segs[i].len, id, (double)v->max_msg / (1 << 20));
			return -EMSGSIZE;
		}
	}
	if (cookie && zc && !(t = track_new(v, cookie, (int)zc + 1)))
		return -ENOMEM;
	pthread_rwlock_rdlock(&v->lock);
	p = peer_get(v, id);
	if (!p) {
		pthread_rwlock_unlock(&v->lock);
		free(t);
		return -EHOSTUNREACH;
	}
	pthread_mutex_lock(&p->mu);
	if (p->lost) { /* (until the handshake succeeds again) */
		rc = p->lost;
		pthread_mutex_unlock(&p->mu);
		pthread_rwlock_unlock(&v->lock);
		free(t);
		return rc;
	}
	/* copied data before the handshake: its outcome is not known yet */
	if (cookie && !t && copied && atomic_load(&p->link->err) != 0 &&
	    !(t = track_new(v, cookie, 1))) {
		pthread_mutex_unlock(&p->mu);
		pthread_rwlock_unlock(&v->lock);
		return -ENOMEM;
	}
	zmq_msg_init_size(&m, meta_len);
	memcpy(zmq_msg_data(&m), meta, meta_len);
	rc = send_frame(&m, p->sock, nseg ? ZMQ_SNDMORE : 0);
	if (rc) {
		pthread_mutex_unlock(&p->mu);
		pthread_rwlock_unlock(&v->lock);
		free(t);
		return rc;
	}
	if (t && p->link) {
		t->link = p->link;
		atomic_fetch_add(&t->link->refs, 1);
	}
	for (i = 0; i < nseg; i++) {
		int flags = i + 1 < nseg ? ZMQ_SNDMORE : 0;
		frame_init(&m, &segs[i], cookie, t);
		rc = send_frame(&m, p->sock, flags);
		if (rc) {
			/* libzmq owns what it took; frames not yet made still count */
			uint32_t j;
			LOG(v, PSL_VAN_LOG_ERROR, "message to node %d cut after frame %u: %s", id,
			    i, zmq_strerror(-rc));
			if (t)
				for (j = i + 1; j < nseg; j++)
					if (tracked(&segs[j], cookie))
						atomic_fetch_sub(&t->refs, 1);
			break;
		}
	}
	/* a send can consume the DEALER's ZMQ_FD edge: look for input ourselves */
	if (zmq_getsockopt(p->sock, ZMQ_EVENTS, &ev, &evlen) == 0 && (ev & ZMQ_POLLIN) &&
	    !atomic_exchange(&p->rx_pending, true))
		zv_wake(v);
	pthread_mutex_unlock(&p->mu);
	pthread_rwlock_unlock(&v->lock);
	if (t)
		zfree(NULL, t); /* the sender's own reference */
	else if (cookie)
		v->host->send_done(v->host->ctx, cookie, 0);
	return 0;
}

/* ------------------------------------------------------------- receive -- */

static void zrelease(struct psl_van_rmsg *pub)
{
	struct zrmsg *r = (struct zrmsg *)pub;
	uint32_t i;
	for (i = 0; i < r->nframes; i++)
		zmq_msg_close(&r->frames[i]);
	zrmsg_put(r);
}

/* "ip:port" of the TCP peer on fd, or "" */
static void fd_peer(int fd, char *out, size_t len)
{
	struct sockaddr_storage a;
	socklen_t alen = sizeof(a);
	char host[48];
	out[0] = 0;
	if (fd <= 0 || getpeername(fd, (struct sockaddr *)&a, &alen) != 0)
		return;
	if (a.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&a;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(out, len, "%s:%d", host, ntohs(in->sin_port));
	} else if (a.ss_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(out, len, "[%s]:%d", host, ntohs(in6->sin6_port));
	}
}

/* Whether "ip:port" (fd_peer's) comes from host (a numeric address). */
static bool from_host(const char *addr, const char *host)
{
	size_t n = strlen(host);
	if (addr[0] == '[')
		addr++;
	return n && !strncmp(addr, host, n) && (addr[n] == ':' || addr[n] == ']');
}

/* A message with identity ps<id> came on the ROUTER's connection fd.
 * ZMQ_ROUTER_HANDOVER gives an identity to its newest connection. If the
 * identity's last connection is still open, two peers use it:
 *  - if that connection spoke before this node connected to node id (before
 *    id was assigned, or this node knew of it), it was a stranger claiming
 *    the identity first: the newer connection has it now, and the old one is
 *    left open and unused (closing it would make its DEALER reconnect and
 *    take the identity back);
 *  - if the new connection comes from node id's host and the old one from
 *    another, node id is a newcomer that took the place of a lost node on
 *    that other host, which may still run (its host cut off, to come back
 *    later): the old connection is left open and unused. Closed, it would
 *    make the lost node's DEALER connect again, and the handover give it
 *    the identity back, away from the newcomer;
 *  - otherwise a second peer took over an identity in use: the old
 *    connection is closed, so that the peer on it (node id, most likely)
 *    hears at once that its connection is lost instead of sending into the
 *    void. */
static void track_identity(struct psl_van *v, int id, int fd)
{
	struct zrid *r;
	struct zpeer *p;
	char now[72], old[72], host[64];
	bool known;
	if (id < 0 || id >= MAX_TRACKED_ID || fd <= 0)
		return;
	if (!v->rid && !(v->rid = calloc(MAX_TRACKED_ID, sizeof(*v->rid))))
		return;
	r = &v->rid[id];
	if (r->fd == fd)
		return;
	pthread_rwlock_rdlock(&v->lock);
	p = peer_get(v, id);
	known = p != NULL;
	snprintf(host, sizeof(host), "%s", p ? p->host : "");
	pthread_rwlock_unlock(&v->lock);
	fd_peer(fd, now, sizeof(now));
	if (r->fd > 0) {
		fd_peer(r->fd, old, sizeof(old));
		if (old[0] && !strcmp(old, r->peer) && !r->early && from_host(now, host) &&
		    !from_host(old, host)) {
			LOG(v, PSL_VAN_LOG_INFO,
			    "identity ps%d came on a connection from node %d's host %s (from %s): "
			    "the one from %s, another host, is left open and unused (node %d took "
			    "the place of a lost node there, which may still run)",
			    id, id, host, now, old, id);
			r->ghost_fd = r->fd;
			r->fd = fd;
			r->early = false;
			snprintf(r->peer, sizeof(r->peer), "%s", now);
			return;
		}
		if (old[0] && !strcmp(old, r->peer) && r->early) {
			LOG(v, PSL_VAN_LOG_WARN,
			    "identity ps%d came on a second connection (from %s): the first (from "
			    "%s) claimed it before node %d was known here, and is ignored from now "
			    "on (PS_JOB_SECRET keeps strangers out)",
			    id, now, old, id);
		} else if (old[0] && !strcmp(old, r->peer)) {
			LOG(v, PSL_VAN_LOG_WARN,
			    "identity ps%d came on a second connection (from %s) while its first "
			    "(from %s) is open: two peers use node id %d; closed the first one "
			    "(if it was node %d's, that node reports the connection lost; "
			    "PS_JOB_SECRET keeps strangers out)",
			    id, now, old, id, id);
			shutdown(r->fd, SHUT_RDWR);
		}
	}
	LOG(v, PSL_VAN_LOG_DEBUG, "identity ps%d on the connection from %s", id, now);
	r->fd = fd;
	r->early = !known;
	snprintf(r->peer, sizeof(r->peer), "%s", now);
}

/* Reads one message [identity][meta][data...] from sock. Returns 1 if one
 * was read (delivered or dropped), 0 if none was waiting. */
static int recv_one(struct psl_van *v, void *sock, struct psl_van_rmsg **out)
{
	zmq_msg_t frames[MAX_FRAMES + 1];
	uint32_t n = 0, i;
	int more = 1, sender, dropped = 0;
	struct zrmsg *r;

	*out = NULL;
	zmq_msg_init(&frames[0]);
	if (zmq_msg_recv(&frames[0], sock, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&frames[0]);
		return 0;
	}
	if (v->secret && sock == v->router) {
		if (!v->rid)
			v->rid = calloc(MAX_TRACKED_ID, sizeof(*v->rid));
		sender = proven_identity(v, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]));
		if (sender < 0)
			dropped = -1; /* read the rest, then drop it */
	} else {
		sender = parse_identity(zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]));
	}
	more = zmq_msg_more(&frames[0]);
	zmq_msg_close(&frames[0]);
	while (more) {
		zmq_msg_t *f = n < MAX_FRAMES ? &frames[n] : &frames[MAX_FRAMES];
		zmq_msg_init(f);
		if (zmq_msg_recv(f, sock, 0) < 0) {
			zmq_msg_close(f);
			break;
		}
		more = zmq_msg_more(f);
		if (n < MAX_FRAMES) {
			n++;
		} else if (dropped >= 0) {
			dropped++;
			zmq_msg_close(f);
		} else {
			zmq_msg_close(f);
		}
	}
	if (dropped < 0) {
		LOG(v, PSL_VAN_LOG_WARN,
		    "dropped a message from a peer whose identity proves no PS_JOB_SECRET "
		    "(a stranger, or a node with another secret or none)");
		for (i = 0; i < n; i++)
			zmq_msg_close(&frames[i]);
		return 1;
	}
	if (sock == v->router && n > 0 && sender != PSL_VAN_ID_NONE)
		track_identity(v, sender, zmq_msg_get(&frames[0], ZMQ_SRCFD));
	if (n == 0 || dropped) {
		LOG(v, PSL_VAN_LOG_WARN,
		    "dropped a message from %s%d: %s", sender == PSL_VAN_ID_NONE ? "an unregistered peer " : "node ",
		    sender == PSL_VAN_ID_NONE ? 0 : sender,
		    n == 0 ? "it has no meta frame" : "it has more than 64 frames");
		for (i = 0; i < n; i++)
			zmq_msg_close(&frames[i]);
		return 1;
	}
	r = zrmsg_get(n);
	if (!r) {
		for (i = 0; i < n; i++)
			zmq_msg_close(&frames[i]);
		return 1;
	}
	for (i = 0; i < n; i++) {
		zmq_msg_init(&r->frames[i]);
		zmq_msg_move(&r->frames[i], &frames[i]);
		zmq_msg_close(&frames[i]);
		if (i > 0)
			r->segs[i - 1] = (struct psl_van_rseg){zmq_msg_data(&r->frames[i]),
							       zmq_msg_size(&r->frames[i]),
							       PSL_MEM_HOST, -1};
	}
	r->pub.sender = sender;
	r->pub.meta = zmq_msg_data(&r->frames[0]);
	r->pub.meta_len = zmq_msg_size(&r->frames[0]);
	r->pub.nseg = n - 1;
	r->pub.segs = r->segs;
	r->pub.release = zrelease;
	*out = &r->pub;
	return 1;
}

/* (zmq_van.h) Others get their turn after DRAIN_MAX messages. */
#define DRAIN_MAX ZV_DRAIN_MAX
int zv_drain_router(struct psl_van *v)
{
	int k;
	for (k = 0; k < DRAIN_MAX; k++) {
		struct psl_van_rmsg *m;
		if (!recv_one(v, v->router, &m))
			break;
		if (m)
			v->host->recv(v->host->ctx, m);
	}
	v->router_clean = k < DRAIN_MAX;
	return k;
}

static void drain_dealer(struct psl_van *v, struct zpeer *p)
{
	int k;
	for (k = 0; k < DRAIN_MAX; k++) {
		struct psl_van_rmsg *m = NULL;
		int ev = 0, got = 0;
		size_t evlen = sizeof(ev);
		pthread_mutex_lock(&p->mu);
		if (zmq_getsockopt(p->sock, ZMQ_EVENTS, &ev, &evlen) == 0 && (ev & ZMQ_POLLIN))
			got = recv_one(v, p->sock, &m);
		pthread_mutex_unlock(&p->mu);
		if (!got)
			return;
		if (m)
			v->host->recv(v->host->ctx, m);
	}
	/* more is waiting: come back after one round of polling */
	if (!atomic_exchange(&p->rx_pending, true))
		zv_wake(v);
}

/* Another van answered where a ZeroMQ peer was expected: connect once with
 * plain TCP and read its greeting ("PSLVAN1 <name>\n", see van.h) to name
 * it. Runs on the receive thread, only on this error path, bounded to 2 s. */
/* how long the probe waits to connect, and for each read of a greeting */
#define PROBE_MS 1000

static void probe_greeting(const char *host, int port, char *name, size_t len)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct pollfd pf;
	char buf[PSL_VAN_GREETING_LEN_MAX];
	size_t got = 0;
	int fd, err = 0;
	socklen_t elen = sizeof(err);

	name[0] = 0;
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		return;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS)
		goto out;
	pf = (struct pollfd){fd, POLLOUT, 0};
	if (poll(&pf, 1, PROBE_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err)
		goto out;
	while (got < sizeof(buf)) {
		ssize_t n;
		pf = (struct pollfd){fd, POLLIN, 0};
		if (poll(&pf, 1, PROBE_MS) != 1)
			break;
		n = read(fd, buf + got, sizeof(buf) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(buf, '\n', got))
			break;
	}
	if (psl_van_greeting_parse(buf, got, name, len, NULL) != PSL_VAN_GREET_OK)
		name[0] = 0;
out:
	close(fd);
}

/* The connection to p is lost (err, -errno), on the receive thread: what
 * libzmq still queues for p is dropped now (linger 0: it lets go of the
 * frames), those sends complete with err, and sends to p fail at once until
 * a handshake succeeds again; the DEALER connects anew, for a peer that
 * comes back. */
static void peer_lost(struct psl_van *v, struct zpeer *p, int err)
{
	struct zlink *old, *fresh = link_new();
	int zero = 0;

	pthread_mutex_lock(&p->mu);
	p->lost = err;
	old = p->link;
	link_settle(old, LINK_OPEN); /* (what libzmq drops now waits) */
	if (fresh) /* (else later sends complete with err too) */
		p->link = fresh;
	else
		atomic_fetch_add(&old->refs, 1);
	zmq_setsockopt(p->sock, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_disconnect(p->sock, p->endpoint) != 0)
		LOG(v, PSL_VAN_LOG_DEBUG, "node %d: disconnect %s: %s", p->id, p->endpoint,
		    zmq_strerror(errno));
	zmq_setsockopt(p->sock, ZMQ_LINGER, &v->linger_ms, sizeof(v->linger_ms));
	if (zmq_connect(p->sock, p->endpoint) != 0)
		LOG(v, PSL_VAN_LOG_WARN, "node %d: cannot connect to %s again: %s", p->id,
		    p->endpoint, zmq_strerror(errno));
	pthread_mutex_unlock(&p->mu);
	link_settle(old, err);
	link_put(old);
}

/* The ZMTP handshake with p succeeded (receive thread): sends to p are
 * taken again, and those that waited for it completed. */
static void peer_reached(struct zpeer *p)
{
	struct zlink *l;
	pthread_mutex_lock(&p->mu);
	p->lost = 0;
	l = p->link;
	atomic_fetch_add(&l->refs, 1);
	pthread_mutex_unlock(&p->mu);
	if (atomic_load(&l->err) == LINK_OPEN)
		link_settle(l, 0);
	link_put(l);
}

static void report_mismatch(struct psl_van *v, struct zpeer *p)
{
	char other[PSL_VAN_NAME_LEN_MAX + 1], detail[480];
	if (p->mismatch_told)
		return;
	probe_greeting(p->host, p->port, other, sizeof(other));
	if (!other[0] && p->up)
		return;
	p->mismatch_told = true;
	peer_lost(v, p, -EPROTO);
	if (other[0])
		snprintf(detail, sizeof(detail), "%s runs van '%s'", p->endpoint, other);
	else
		snprintf(detail, sizeof(detail),
			 "%s accepted the TCP connection, then closed it or failed the ZeroMQ "
			 "handshake, and sent no van greeting within %d s: it may be busy or "
			 "exiting, or be no pslite/ZeroMQ node (another van, another program)",
			 p->endpoint, PROBE_MS / 1000);
	v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_MISMATCH, -EPROTO, detail);
}

static void read_monitor(struct psl_van *v, struct zpeer *p)
{
	for (;;) {
		zmq_msg_t a, b;
		uint16_t event;
		int32_t value;
		char detail[320];

		zmq_msg_init(&a);
		if (zmq_msg_recv(&a, p->mon, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&a);
			return;
		}
		zmq_msg_init(&b);
		if (zmq_msg_more(&a))
			zmq_msg_recv(&b, p->mon, 0);
		if (zmq_msg_size(&a) < 6) {
			zmq_msg_close(&a);
			zmq_msg_close(&b);
			continue;
		}
		memcpy(&event, zmq_msg_data(&a), 2);
		memcpy(&value, (char *)zmq_msg_data(&a) + 2, 4);
		zmq_msg_close(&a);
		zmq_msg_close(&b);
		switch (event) {
		case ZMQ_EVENT_CONNECTED:
			p->tcp_connected = true;
			break;
		case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
			p->tcp_connected = false;
			peer_reached(p);
			if (!p->up) {
				p->up = true;
				v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_UP, 0, NULL);
			}
			break;
		case ZMQ_EVENT_DISCONNECTED:
			if (p->up) {
				p->up = false;
				snprintf(detail, sizeof(detail), "%s closed the connection",
					 p->endpoint);
				peer_lost(v, p, -ECONNRESET);
				v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_DOWN,
						    -ECONNRESET, detail);
			} else if (p->tcp_connected) {
				/* closed before the handshake completed: another van? */
				p->tcp_connected = false;
				report_mismatch(v, p);
			}
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
		case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
			p->tcp_connected = false;
			report_mismatch(v, p);
			break;
		default:
			break;
		}
	}
}

static void peer_close(struct psl_van *v, struct zpeer *p)
{
	int zero = 0, err = atomic_load(&p->link->err);
	zmq_socket_monitor(p->sock, NULL, 0);
	if (p->drop) { /* what libzmq still holds for a lost node goes now */
		link_settle(p->link, LINK_OPEN);
		err = -ECONNRESET;
	}
	zmq_setsockopt(p->sock, ZMQ_LINGER, p->drop ? &zero : &v->linger_ms, sizeof(int));
	zmq_close(p->sock);
	zmq_close(p->mon);
	/* (what libzmq still holds for a peer never reached did not reach it) */
	if (p->drop || err == LINK_OPEN)
		link_settle(p->link, p->drop ? err : -ENOTCONN);
	link_put(p->link);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* The CPUs this process may run on (its affinity mask; else those online). */
static int cpus_allowed(void)
{
	cpu_set_t set;
	long n;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* Reads the ROUTER unless a caller reads it now (zmq_progress.c); *more:
 * look again without waiting (a drain stopped at its limit, or a caller
 * held it). Returns how many messages it read. */
static int read_router(struct psl_van *v, bool *more)
{
	int n;
	if (pthread_mutex_trylock(&v->rx_mu)) {
		*more = true; /* (next round the caller's window keeps us aside) */
		return 0;
	}
	n = zv_drain_router(v);
	pthread_mutex_unlock(&v->rx_mu);
	*more = n == DRAIN_MAX;
	return n;
}

/*
 * The receive loop waits in poll(2) on the ZMQ_FDs of the ROUTER, of each
 * monitor and of each DEALER, and on the eventfd, not in zmq_poll: zmq_poll
 * asks every socket for ZMQ_EVENTS before and after each wait, and each ask
 * costs libzmq two system calls (a poll of the socket's mailbox and a
 * getpid), most of a small request's system calls (docs/performance.md).
 * A ZMQ_FD only says that commands reached the socket since they were last
 * processed, so a socket is read until it says EAGAIN (which processes them
 * all; from then on its fd tells of new input) and looked at without
 * waiting when that was not done: after the peer table changed (other
 * threads used the new sockets) and when a drain stopped at its limit.
 */
static void *recv_main(void *arg)
{
	struct psl_van *v = arg;
	struct pollfd *pfd = NULL;
	struct zpeer **snap = NULL;
	int npfd = 0, npeer = 0, cap = 0;
	unsigned seen_gen = ~0u;
	bool look_all = true, router_more = false;
	struct psl_van_spin spin;

	zv_reading = v;
	psl_van_spin_init(&spin, v->spin_ns);
	while (!atomic_load(&v->stop)) {
		int i, rc, timeout;
		bool spinning, aside, got = false;
		if (atomic_load(&v->gen) != seen_gen) {
			struct zpeer *grave;
			pthread_rwlock_wrlock(&v->lock);
			seen_gen = atomic_load(&v->gen);
			grave = v->grave;
			v->grave = NULL;
			if (cap < 2 + 2 * v->npeers) {
				cap = 2 + 2 * v->npeers + 16;
				pfd = realloc(pfd, sizeof(*pfd) * (size_t)cap);
				snap = realloc(snap, sizeof(*snap) * (size_t)cap);
			}
			npfd = 0;
			npeer = 0;
			pfd[npfd++] = (struct pollfd){.fd = v->wake_fd, .events = POLLIN};
			pfd[npfd++] = (struct pollfd){.fd = v->router_fd, .events = POLLIN};
			for (i = 0; i < v->npeers; i++) {
				struct zpeer *p = v->peers[i];
				if (!p)
					continue;
				snap[npeer++] = p;
				pfd[npfd++] = (struct pollfd){.fd = p->mon_fd, .events = POLLIN};
				pfd[npfd++] = (struct pollfd){.fd = p->fd, .events = POLLIN};
			}
			pthread_rwlock_unlock(&v->lock);
			while (grave) {
				struct zpeer *n = grave->next;
				peer_close(v, grave);
				grave = n;
			}
			look_all = true;
		}
		if (atomic_load(&v->router_look) && atomic_exchange(&v->router_look, false))
			router_more = true;
		timeout = look_all ? 0 : -1;
		aside = zv_aside(v, &timeout, &router_more);
		spinning = !aside && psl_van_spinning(&spin, psl_van_now_ns());
		if (spinning || (router_more && !aside))
			timeout = 0;
		pfd[1].fd = aside ? -1 : v->router_fd; /* (poll skips it) */
		rc = poll(pfd, (nfds_t)npfd, timeout);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			LOG(v, PSL_VAN_LOG_ERROR, "poll: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents & POLLIN) {
			uint64_t x;
			ssize_t r = read(v->wake_fd, &x, sizeof(x));
			(void)r;
		}
		if (!aside && (look_all || router_more || (pfd[1].revents & POLLIN)))
			got = read_router(v, &router_more) > 0;
		for (i = 0; i < npeer; i++) {
			struct zpeer *p = snap[i];
			if (look_all || (pfd[2 + 2 * i].revents & POLLIN))
				read_monitor(v, p);
			if (look_all || (pfd[3 + 2 * i].revents & POLLIN) ||
			    atomic_exchange(&p->rx_pending, false))
				drain_dealer(v, p);
		}
		look_all = false;
		if (got || rc > 0)
			psl_van_spin_hit(&spin, psl_van_now_ns());
		else if (spinning) /* a late return ends the window */
			psl_van_spin_yield(&spin);
	}
	free(pfd);
	free(snap);
	psl_van_spin_report(v->host, "van_zmq", &spin);
	return NULL;
}

/* ----------------------------------------------------------- lifecycle -- */

static int set_int(void *s, int opt, int val)
{
	return zmq_setsockopt(s, opt, &val, sizeof(val));
}

/* An integer setting from min to max; a bad value is an error naming it. */
static int param_int(struct psl_van *v, const char *name, long def, long min, long max,
		     const char *what, int *out)
{
	long x;
	int rc = psl_van_param_long(v->host, "van_zmq", name, def, min, max, what, &x);
	if (rc == 0)
		*out = (int)x;
	return rc;
}

/* PS_ZMQ_MAX_MSG_MB: MiB, a fraction allowed (0.01 for 10 KiB), from 1 KiB
 * to 1 TiB; into bytes. */
static int param_max_msg(struct psl_van *v, int64_t *out)
{
	const char *s = psl_van_param(v->host, "PS_ZMQ_MAX_MSG_MB");
	char *end;
	double mb;

	*out = (int64_t)512 << 20;
	if (!s)
		return 0;
	errno = 0;
	mb = strtod(s, &end);
	if (errno || end == s || *end || !(mb * (1 << 20) >= 1024.0) || mb > (double)(1 << 20)) {
		LOG(v, PSL_VAN_LOG_ERROR,
		    "PS_ZMQ_MAX_MSG_MB=%s: expected MiB from 0.001 to 1048576 (a fraction such as "
		    "0.5 is fine; at least 1 KiB)",
		    s);
		return -EINVAL;
	}
	*out = (int64_t)(mb * (1 << 20));
	return 0;
}

static int zinit(const struct psl_van_host *host, struct psl_van **out)
{
	struct psl_van *v = calloc(1, sizeof(*v));
	int maxs, rc;
	bool busy;
	int64_t spin_ns;
	if (!v)
		return -ENOMEM;
	v->host = host;
	v->wake_fd = -1;
	if ((rc = param_int(v, "BYTEPS_ZMQ_NTHREADS", 1, 1, 64, "a number of threads",
			    &v->io_threads)) ||
	    (rc = param_int(v, "BYTEPS_ZMQ_MAX_SOCKET", 1024, 1, 1 << 20, "a number of sockets",
			    &maxs)) ||
	    (rc = psl_van_busy_poll_plain(v->host, "van_zmq", &busy, &spin_ns)) ||
	    (rc = param_int(v, "PS_ZMQ_LINGER_MS", 500, -1, 3600000, "milliseconds (-1: for ever)",
			    &v->linger_ms)) ||
	    (rc = param_int(v, "PS_ZMQ_RCVHWM", 10000, 1, 100000000, "a number of messages",
			    &v->rcvhwm)) ||
	    (rc = param_max_msg(v, &v->max_msg)) ||
	    (rc = param_int(v, "PS_ZMQ_BUSY_POLL_MIN_CPUS", v->io_threads + 2, 1, 1 << 20,
			    "a number of CPUs", &v->busy_min_cpus))) {
		free(v);
		return rc;
	}
	if (host->size >= PSL_VAN_HOST_SIZE_1_2 && host->proof && host->proof_check) {
		uint8_t mac[32];
		v->secret = host->proof(host->ctx, "", 0, mac) == 0;
	}
	v->busy_poll = busy;
	v->spin_ns = v->busy_poll ? spin_ns : 0;
	v->ctx = zmq_ctx_new();
	if (!v->ctx) {
		free(v);
		return -ENOMEM;
	}
	zmq_ctx_set(v->ctx, ZMQ_IO_THREADS, v->io_threads);
	zmq_ctx_set(v->ctx, ZMQ_MAX_SOCKETS, maxs);
	pthread_rwlock_init(&v->lock, NULL);
	pthread_mutex_init(&v->rx_mu, NULL);
	*out = v;
	return 0;
}

static int zquery(struct psl_van *v, struct psl_van_caps *caps)
{
	int maj, min, pat;
	zmq_version(&maj, &min, &pat);
	caps->flags = PSL_VAN_CAP_ZC_SEND | PSL_VAN_CAP_ZC_RECV | PSL_VAN_CAP_MEM_HOST |
		      PSL_VAN_CAP_PSLITE_WIRE;
	caps->max_msg_size = 0;
	snprintf(caps->transports, sizeof(caps->transports),
		 "tcp (libzmq %d.%d.%d, %d io thread%s%s)", maj, min, pat, v->io_threads,
		 v->io_threads > 1 ? "s" : "", v->busy_poll ? ", polls after each message" : "");
	return 0;
}

/* A numeric IPv4 address for host (libzmq binds interfaces and numbers, not
 * names). */
static void numeric_host(const char *host, char *out, size_t len)
{
	struct in_addr a;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	if (inet_pton(AF_INET, host, &a) == 1 || !strcmp(host, "*") ||
	    getaddrinfo(host, NULL, &hints, &res) != 0) {
		snprintf(out, len, "%s", host);
		return;
	}
	inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, (socklen_t)len);
	freeaddrinfo(res);
}

static int zbind(struct psl_van *v, const struct psl_van_bind_req *req,
		 struct psl_van_bind_res *res)
{
	char ep[160], host[128], last[160];
	size_t len = sizeof(last);
	const char *colon;
	int rc;

	if (v->router)
		return -EALREADY;
	if (req->role == 2) { /* the scheduler carries no data: it never polls */
		v->busy_poll = false;
		v->spin_ns = 0;
	}
	if (v->busy_poll && cpus_allowed() < v->busy_min_cpus) {
		int n = cpus_allowed();
		LOG(v, PSL_VAN_LOG_INFO,
		    "PS_BUSY_POLL=1 ignored: %d CPU%s for this process, fewer than "
		    "PS_ZMQ_BUSY_POLL_MIN_CPUS=%d (polling would take the CPU that libzmq's "
		    "io thread%s and the caller need); sleeping between messages",
		    n, n == 1 ? "" : "s", v->busy_min_cpus, v->io_threads > 1 ? "s" : "");
		v->busy_poll = false;
		v->spin_ns = 0;
	}
	numeric_host(req->host, host, sizeof(host));
	v->router = zmq_socket(v->ctx, ZMQ_ROUTER);
	if (!v->router)
		return -errno;
	set_int(v->router, ZMQ_RCVHWM, v->rcvhwm);
	set_int(v->router, ZMQ_SNDHWM, 0);
	set_int(v->router, ZMQ_ROUTER_HANDOVER, 1);
	zmq_setsockopt(v->router, ZMQ_MAXMSGSIZE, &v->max_msg, sizeof(v->max_msg));
	set_int(v->router, ZMQ_LINGER, v->linger_ms);
	if (req->port > 0)
		snprintf(ep, sizeof(ep), "tcp://%s:%d", host, req->port);
	else
		snprintf(ep, sizeof(ep), "tcp://%s:*", host);
	if (zmq_bind(v->router, ep) != 0) {
		rc = -errno;
		LOG(v, PSL_VAN_LOG_DEBUG, "zmq_bind(%s): %s", ep, zmq_strerror(-rc));
		zmq_close(v->router);
		v->router = NULL;
		return rc;
	}
	if (zmq_getsockopt(v->router, ZMQ_LAST_ENDPOINT, last, &len) != 0 ||
	    !(colon = strrchr(last, ':'))) {
		zmq_close(v->router);
		v->router = NULL;
		return -EIO;
	}
	res->port = atoi(colon + 1);
	res->addr_len = 0;
	len = sizeof(v->router_fd);
	if (zmq_getsockopt(v->router, ZMQ_FD, &v->router_fd, &len) != 0) {
		zmq_close(v->router);
		v->router = NULL;
		return -EIO;
	}
	v->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (v->wake_fd < 0) {
		rc = -errno;
		zmq_close(v->router);
		v->router = NULL;
		return rc;
	}
	rc = pthread_create(&v->thread, NULL, recv_main, v);
	if (rc) {
		close(v->wake_fd);
		v->wake_fd = -1;
		zmq_close(v->router);
		v->router = NULL;
		return -rc;
	}
	v->running = true;
	atomic_store(&v->bound, true);
	LOG(v, PSL_VAN_LOG_DEBUG, "bound %s", last);
	return 0;
}

static int zconnect(struct psl_van *v, const struct psl_van_peer *peer, int32_t my_id)
{
	struct zpeer *p, *old = NULL;
	char mon_ep[96], host[128];
	size_t fdlen = sizeof(int);
	int id = peer->id;

	if (id < 0 || id > 65535 || !peer->host || peer->port <= 0 || peer->port > 65535)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->id = id;
	p->link = link_new();
	if (!p->link) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->mu, NULL);
	atomic_init(&p->rx_pending, false);
	numeric_host(peer->host, host, sizeof(host));
	snprintf(p->host, sizeof(p->host), "%.63s", host);
	p->port = peer->port;
	snprintf(p->endpoint, sizeof(p->endpoint), "tcp://%.100s:%d", host, peer->port);
	p->sock = zmq_socket(v->ctx, ZMQ_DEALER);
	p->mon = zmq_socket(v->ctx, ZMQ_PAIR);
	if (!p->sock || !p->mon)
		goto fail;
	{
		char ident[160];
		int n = make_identity(v, my_id, ident, sizeof(ident));
		if (n < 0) {
			errno = -n;
			goto fail;
		}
		if (n > 0)
			zmq_setsockopt(p->sock, ZMQ_ROUTING_ID, ident, (size_t)n);
	}
	set_int(p->sock, ZMQ_SNDHWM, 0);
	set_int(p->sock, ZMQ_RCVHWM, v->rcvhwm);
	zmq_setsockopt(p->sock, ZMQ_MAXMSGSIZE, &v->max_msg, sizeof(v->max_msg));
	set_int(p->sock, ZMQ_LINGER, v->linger_ms);
	snprintf(mon_ep, sizeof(mon_ep), "inproc://psl-zmq-mon-%p-%u", (void *)v,
		 atomic_fetch_add(&v->mon_seq, 1));
	if (zmq_socket_monitor(p->sock, mon_ep,
			       ZMQ_EVENT_CONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
				       ZMQ_EVENT_DISCONNECTED |
				       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0 ||
	    zmq_connect(p->mon, mon_ep) != 0)
		goto fail;
	if (zmq_connect(p->sock, p->endpoint) != 0)
		goto fail;
	if (zmq_getsockopt(p->sock, ZMQ_FD, &p->fd, &fdlen) != 0)
		goto fail;
	fdlen = sizeof(p->mon_fd);
	if (zmq_getsockopt(p->mon, ZMQ_FD, &p->mon_fd, &fdlen) != 0)
		goto fail;

	pthread_rwlock_wrlock(&v->lock);
	if (id >= v->npeers) {
		int n = id + 16;
		struct zpeer **np = realloc(v->peers, sizeof(*np) * (size_t)n);
		if (!np) {
			pthread_rwlock_unlock(&v->lock);
			goto fail;
		}
		memset(np + v->npeers, 0, sizeof(*np) * (size_t)(n - v->npeers));
		v->peers = np;
		v->npeers = n;
	}
	old = v->peers[id];
	v->peers[id] = p;
	if (old) {
		old->next = v->grave;
		v->grave = old;
	}
	atomic_fetch_add(&v->gen, 1);
	pthread_rwlock_unlock(&v->lock);
	zv_wake(v);
	if (my_id == PSL_VAN_ID_NONE)
		LOG(v, PSL_VAN_LOG_DEBUG, "node %d: anonymous DEALER to %s", id, p->endpoint);
	else
		LOG(v, PSL_VAN_LOG_DEBUG, "node %d: DEALER ps%d to %s", id, my_id, p->endpoint);
	return 0;
fail: {
	int e = errno ? errno : EIO;
	/* the core reports the failure (naming the node and what to check) */
	LOG(v, PSL_VAN_LOG_DEBUG, "cannot connect to %s: %s", p->endpoint, zmq_strerror(e));
	if (p->sock)
		zmq_close(p->sock);
	if (p->mon)
		zmq_close(p->mon);
	link_put(p->link);
	pthread_mutex_destroy(&p->mu);
	free(p);
	return -e;
}
}

static int zdisconnect(struct psl_van *v, int32_t id)
{
	struct zpeer *p;
	pthread_rwlock_wrlock(&v->lock);
	p = peer_get(v, id);
	if (p) {
		v->peers[id] = NULL;
		p->drop = true;
		p->next = v->grave;
		v->grave = p;
		atomic_fetch_add(&v->gen, 1);
	}
	pthread_rwlock_unlock(&v->lock);
	if (p)
		zv_wake(v);
	return p ? 0 : -ENOENT;
}

static void zfini(struct psl_van *v)
{
	int i;
	if (v->running) {
		atomic_store(&v->stop, true);
		zv_wake(v);
		pthread_join(v->thread, NULL);
	}
	atomic_store(&v->stop, true); /* (callers: -ESHUTDOWN from now on) */
	pthread_mutex_lock(&v->rx_mu); /* after a caller's pass in flight */
	pthread_mutex_unlock(&v->rx_mu);
	for (i = 0; i < v->npeers; i++)
		if (v->peers[i])
			peer_close(v, v->peers[i]);
	while (v->grave) {
		struct zpeer *n = v->grave->next;
		peer_close(v, v->grave);
		v->grave = n;
	}
	if (v->router)
		zmq_close(v->router);
	/* waits until libzmq let go of every frame (send_done calls included) */
	zmq_ctx_term(v->ctx);
	if (v->wake_fd >= 0)
		close(v->wake_fd);
	pthread_rwlock_destroy(&v->lock);
	pthread_mutex_destroy(&v->rx_mu);
	free(v->peers);
	free(v->rid);
	free(v);
}

static const struct psl_van_ops zmq_ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = VAN,
	.version = "pslite van_zmq " PSL_VAN_VERSION " (built with libzmq " STR(
		ZMQ_VERSION_MAJOR) "." STR(ZMQ_VERSION_MINOR) "." STR(ZMQ_VERSION_PATCH) ")",
	.description = "ZeroMQ over TCP, wire-compatible with ps-lite (byteps branch)",
	.init = zinit,
	.fini = zfini,
	.query = zquery,
	.bind = zbind,
	.connect = zconnect,
	.disconnect = zdisconnect,
	.send = zsend,
	.progress = zv_progress, /* zmq_progress.c */
};

PSL_VAN_DEFINE_ENTRY(zmq_ops)
