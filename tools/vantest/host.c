/*
 * pslite-vantest's host: the callbacks a van calls (struct psl_van_host),
 * checking every message that arrives, and the helpers the cases use to
 * start instances and send messages.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vt.h"

char vt_why[1024];

void vt_failf(int line, const char *fmt, ...)
{
	va_list ap;
	if (vt_why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(vt_why, sizeof(vt_why), fmt, ap);
	va_end(ap);
	if (vt.verbose)
		fprintf(stderr, "vantest: failed at cases.c:%d: %s\n", line, vt_why);
}

void vt_note(const char *fmt, ...)
{
	va_list ap;
	if (!vt.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "vantest: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

int64_t vt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void vt_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* ----------------------------------------------------------- patterns -- */

uint8_t vt_pat(uint32_t seed, size_t k)
{
	return (uint8_t)(seed + k * 7 + (k >> 8) * 13 + (k >> 16) * 3);
}

uint32_t vt_seed(uint32_t stream, uint32_t seq, uint32_t seg)
{
	return stream * 0x9E3779B1u + seq * 0x85EBCA6Bu + seg * 0xC2B2AE35u + 1;
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* ------------------------------------------------------------ the host -- */

static struct vt_host *H(void *ctx)
{
	return ctx;
}

/* Every callback starts here: counts it, notes one after fini. */
static void entered(struct vt_host *t, const char *what)
{
	atomic_fetch_add(&t->callbacks, 1);
	if (atomic_load(&t->closed) && atomic_fetch_add(&t->after_fini, 1) == 0)
		snprintf(t->after_what, sizeof(t->after_what), "%s", what);
}

static void host_error(struct vt_host *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void host_error(struct vt_host *t, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&t->mu);
	if (atomic_fetch_add(&t->nerr, 1) == 0) {
		int k = snprintf(t->err, sizeof(t->err), "%s: ", t->label);
		va_start(ap, fmt);
		vsnprintf(t->err + k, sizeof(t->err) - (size_t)k, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&t->mu);
}

static void t_vlog(void *ctx, int level, const char *van, const char *fmt, va_list ap)
{
	struct vt_host *t = H(ctx);
	char line[1024];
	entered(t, "vlog");
	vsnprintf(line, sizeof(line), fmt, ap);
	if (level == PSL_VAN_LOG_ERROR)
		atomic_fetch_add(&t->log_errors, 1);
	if (level == PSL_VAN_LOG_WARN)
		atomic_fetch_add(&t->log_warns, 1);
	pthread_mutex_lock(&t->mu);
	{
		int n = snprintf(t->log + t->loglen, sizeof(t->log) - t->loglen, "%d %s\n", level,
				 line);
		if (n > 0 && t->loglen + (size_t)n < sizeof(t->log))
			t->loglen += (size_t)n;
	}
	pthread_mutex_unlock(&t->mu);
	if (vt.verbose || level <= PSL_VAN_LOG_WARN)
		fprintf(stderr, "[%s %s %s] %s\n", t->label, van ? van : "?",
			level == 0   ? "ERROR"
			: level == 1 ? "WARN"
			: level == 2 ? "INFO"
				     : "DEBUG",
			line);
}

/* proof(): a keyed FNV-1a stream over secret and msg, 32 bytes; enough to
 * tell one secret from another, which is all a van may rely on. */
static void toy_mac(const char *secret, const void *msg, size_t len, uint8_t mac[32])
{
	const uint8_t *m = msg;
	uint64_t h = 1469598103934665603ull;
	size_t i;
	int k;
	for (i = 0; secret[i]; i++)
		h = (h ^ (uint8_t)secret[i]) * 1099511628211ull;
	for (i = 0; i < len; i++)
		h = (h ^ m[i]) * 1099511628211ull;
	for (k = 0; k < 32; k++) {
		h = (h ^ (uint64_t)k) * 1099511628211ull;
		mac[k] = (uint8_t)(h >> 29);
	}
}

static int t_proof(void *ctx, const void *msg, size_t len, uint8_t mac[32])
{
	struct vt_host *t = H(ctx);
	entered(t, "proof");
	if (!t->secret)
		return -ENOENT;
	toy_mac(t->secret, msg, len, mac);
	return 0;
}

static int t_proof_check(void *ctx, const void *msg, size_t len, const uint8_t mac[32])
{
	struct vt_host *t = H(ctx);
	uint8_t want[32];
	entered(t, "proof_check");
	if (!t->secret)
		return -ENOENT;
	toy_mac(t->secret, msg, len, want);
	return memcmp(want, mac, 32) ? -EACCES : 0;
}

static const char *t_param(void *ctx, const char *name)
{
	struct vt_host *t = H(ctx);
	int i;
	entered(t, "param");
	for (i = 0; i < 8 && t->pname[i]; i++)
		if (!strcmp(t->pname[i], name))
			return t->pval[i];
	return getenv(name);
}

/* Checks a received message against what vt_send_msg made; "" when whole. */
static void check_msg(struct vt_host *t, const struct psl_van_rmsg *m, uint32_t *stream,
		      uint32_t *seq, char *why, size_t wl)
{
	const uint8_t *meta = m->meta;
	uint32_t nseg, s, flags;
	size_t meta_len, k;

	why[0] = 0;
	if (!meta || m->meta_len < 24 || memcmp(meta, "VTM1", 4)) {
		snprintf(why, wl, "a message with a meta of %zu bytes that was never sent",
			 m->meta_len);
		return;
	}
	*stream = get32(meta + 4);
	*seq = get32(meta + 8);
	nseg = get32(meta + 12);
	meta_len = get32(meta + 16);
	flags = get32(meta + 20);
	(void)flags;
	if (meta_len != m->meta_len) {
		snprintf(why, wl, "message %u/%u: meta of %zu bytes, sent %zu", *stream, *seq,
			 m->meta_len, meta_len);
		return;
	}
	for (k = VT_META_MIN(nseg); k < meta_len; k++)
		if (meta[k] != vt_pat(vt_seed(*stream, *seq, 99), k)) {
			snprintf(why, wl, "message %u/%u: meta byte %zu of %zu differs", *stream,
				 *seq, k, meta_len);
			return;
		}
	if (m->nseg != nseg) {
		snprintf(why, wl, "message %u/%u: %u segments, sent %u", *stream, *seq, m->nseg,
			 nseg);
		return;
	}
	for (s = 0; s < nseg; s++) {
		const struct psl_van_rseg *r = &m->segs[s];
		size_t len = (size_t)get64(meta + 24 + 8 * s);
		uint32_t seed = vt_seed(*stream, *seq, s);
		const uint8_t *p = r->data;
		if (r->len != len) {
			snprintf(why, wl, "message %u/%u: segment %u has %zu bytes, sent %zu",
				 *stream, *seq, s, r->len, len);
			return;
		}
		if (r->mem_type != PSL_MEM_HOST) {
			snprintf(why, wl, "message %u/%u: segment %u of memory type %d, sent host",
				 *stream, *seq, s, r->mem_type);
			return;
		}
		if (len && !p) {
			snprintf(why, wl, "message %u/%u: segment %u has no data", *stream, *seq,
				 s);
			return;
		}
		for (k = 0; k < len; k++)
			if (p[k] != vt_pat(seed, k)) {
				snprintf(why, wl,
					 "message %u/%u: segment %u (%zu bytes) differs from byte "
					 "%zu "
					 "(got 0x%02x, sent 0x%02x)",
					 *stream, *seq, s, len, k, p[k], vt_pat(seed, k));
				return;
			}
	}
}

static void t_recv(void *ctx, struct psl_van_rmsg *m)
{
	struct vt_host *t = H(ctx);
	uint32_t stream = 0, seq = 0, s;
	char why[256];
	int i;

	entered(t, "recv");
	if (!m || !m->release) {
		host_error(t, "recv got %s", m ? "a message without release" : "NULL");
		return;
	}
	check_msg(t, m, &stream, &seq, why, sizeof(why));
	if (why[0])
		host_error(t, "from node %d: %s", m->sender, why);
	pthread_mutex_lock(&t->mu);
	if (!why[0]) {
		if (t->expect_sender != -2 && m->sender != t->expect_sender)
			snprintf(why, sizeof(why), "message %u/%u: sender %d, expected %d", stream,
				 seq, m->sender, t->expect_sender);
		for (i = 0; i < t->nstreams; i++)
			if (t->streams[i].sender == m->sender && t->streams[i].stream == stream)
				break;
		if (i == t->nstreams && i < VT_MAXSTREAM) {
			t->streams[i].sender = m->sender;
			t->streams[i].stream = stream;
			t->streams[i].next = 0;
			t->nstreams++;
		}
		if (i < VT_MAXSTREAM) {
			if (seq != t->streams[i].next && !why[0])
				snprintf(why, sizeof(why),
					 "from node %d, stream %u: message %u arrived when %u was "
					 "next (order lost, or a message lost or repeated)",
					 m->sender, stream, seq, t->streams[i].next);
			t->streams[i].next = seq + 1;
		}
		/* a lent segment: its loan came back (status 0) before this */
		for (s = 0; s < m->nseg; s++)
			for (i = 0; i < t->nloans; i++)
				if (m->segs[s].data == t->loans[i].buf && t->loans[i].buf) {
					if (t->loans[i].puts != 1 || t->loans[i].status != 0)
						snprintf(why, sizeof(why),
							 "a message delivered into a lent buffer "
							 "whose loan came back %d times (status "
							 "%d) before",
							 t->loans[i].puts, t->loans[i].status);
					if (t->loans[i].delivered)
						snprintf(why, sizeof(why),
							 "two messages delivered into one loan");
					t->loans[i].delivered = true;
				}
	}
	pthread_mutex_unlock(&t->mu);
	if (why[0])
		host_error(t, "%s", why);
	atomic_fetch_add(&t->nrecv, 1);
	if (atomic_load(&t->has_driver) && pthread_equal(pthread_self(), t->driver))
		atomic_fetch_add(&t->on_driver, 1);
	if (t->drive_in_recv) { /* a wait inside a callback: never a progress in a progress */
		int rc = vt_ops->progress(t->van, 0);
		if (rc != -EDEADLK && !atomic_fetch_add(&t->recv_drive_bad, 1))
			atomic_store(&t->recv_drive_rc, rc);
	}
	if (t->echo) {
		struct psl_van_seg segs[VT_MAXSEG];
		uint32_t n = m->nseg < VT_MAXSEG ? m->nseg : VT_MAXSEG;
		long k = atomic_fetch_add(&t->echo_sent, 1);
		struct vt_send *c = k < t->echo_cap ? &t->echo_cookies[k] : NULL;
		for (s = 0; s < n; s++)
			segs[s] = (struct psl_van_seg){m->segs[s].data, m->segs[s].len,
						       PSL_MEM_HOST, -1, NULL};
		if (vt_ops->send(t->van, t->echo_to, m->meta, m->meta_len, segs, n, c))
			atomic_fetch_add(&t->echo_fail, 1);
	}
	if (t->hold || t->echo) {
		pthread_mutex_lock(&t->mu);
		if (t->nheld == t->capheld) {
			int cap = t->capheld ? 2 * t->capheld : 256;
			void *p = realloc(t->held, (size_t)cap * sizeof(*t->held));
			if (p) {
				t->held = p;
				t->capheld = cap;
			}
		}
		if (t->nheld < t->capheld) {
			t->held[t->nheld++] = m;
			m = NULL;
		}
		pthread_mutex_unlock(&t->mu);
	}
	if (m)
		m->release(m);
}

static void t_send_done(void *ctx, void *cookie, int status)
{
	struct vt_host *t = H(ctx);
	struct vt_send *s = cookie;
	entered(t, "send_done");
	atomic_fetch_add(&t->done_calls, 1);
	if (status)
		atomic_fetch_add(&t->done_errors, 1);
	if (!s) {
		atomic_fetch_add(&t->done_null, 1);
		host_error(t, "send_done with a NULL cookie (a send without a cookie gets none)");
		return;
	}
	if (status > 0)
		host_error(t, "send_done with status %d (0 or -errno expected)", status);
	atomic_store(&s->status, status);
	if (atomic_fetch_add(&s->done, 1) > 0) {
		host_error(t, "send_done called twice for one send (status %d)", status);
		return;
	}
	if (s->poison) {
		uint32_t i;
		for (i = 0; i < s->nseg; i++)
			if (s->bufs[i])
				memset(s->bufs[i], 0xEE, s->lens[i]);
	}
}

static void t_peer_event(void *ctx, int32_t id, int event, int err, const char *detail)
{
	struct vt_host *t = H(ctx);
	entered(t, "peer_event");
	pthread_mutex_lock(&t->mu);
	if (t->nev < VT_MAXEV) {
		struct vt_ev *e = &t->evs[t->nev++];
		e->id = id;
		e->event = event;
		e->err = err;
		snprintf(e->detail, sizeof(e->detail), "%s", detail ? detail : "");
	}
	pthread_mutex_unlock(&t->mu);
	if (vt.verbose)
		fprintf(stderr, "[%s] peer_event node %d %s err %d %s\n", t->label, id,
			event == PSL_VAN_PEER_UP     ? "UP"
			: event == PSL_VAN_PEER_DOWN ? "DOWN"
						     : "MISMATCH",
			err, detail ? detail : "");
}

#define GUARD 64

static int t_recv_dest(void *ctx, int32_t sender, const void *meta, size_t meta_len, uint32_t seg,
		       size_t len, struct psl_van_dest *dest)
{
	struct vt_host *t = H(ctx);
	int rc = -ENOENT;
	(void)sender;
	entered(t, "recv_dest");
	atomic_fetch_add(&t->dest_calls, 1);
	if (!meta || meta_len < 24) {
		host_error(t, "recv_dest with a meta of %zu bytes", meta_len);
		return -EINVAL;
	}
	pthread_mutex_lock(&t->mu);
	if (t->lend && (get32((const uint8_t *)meta + 20) & VT_F_LEND) && seg == 1 &&
	    t->nloans < VT_MAXLOAN) {
		struct vt_loan *l = &t->loans[t->nloans];
		l->mem = malloc(len + 2 * GUARD);
		if (l->mem) {
			memset(l->mem, 0xA5, len + 2 * GUARD);
			l->buf = l->mem + GUARD;
			l->len = len;
			dest->data = l->buf;
			dest->mem_type = PSL_MEM_HOST;
			dest->dev_id = -1;
			dest->loan = (void *)(intptr_t)(t->nloans + 1);
			t->nloans++;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

static void t_recv_dest_put(void *ctx, void *loan, int status)
{
	struct vt_host *t = H(ctx);
	intptr_t i = (intptr_t)loan - 1;
	bool bad = false;
	int puts = 0;
	entered(t, "recv_dest_put");
	pthread_mutex_lock(&t->mu);
	if (i < 0 || i >= t->nloans)
		bad = true;
	else {
		puts = ++t->loans[i].puts;
		t->loans[i].status = status;
	}
	pthread_mutex_unlock(&t->mu);
	if (bad)
		host_error(t, "recv_dest_put with a loan never granted (%p)", loan);
	else if (puts > 1)
		host_error(t, "the loan of recv_dest %ld came back %d times", (long)i, puts);
}

static int trap_recv_dest(void *ctx, int32_t sender, const void *meta, size_t meta_len,
			  uint32_t seg, size_t len, struct psl_van_dest *dest)
{
	(void)sender, (void)meta, (void)meta_len, (void)seg, (void)len, (void)dest;
	host_error(H(ctx), "recv_dest called although the host's size says ABI 1.0");
	return -ENOSYS;
}

static void trap_recv_dest_put(void *ctx, void *loan, int status)
{
	(void)loan, (void)status;
	host_error(H(ctx), "recv_dest_put called although the host's size says ABI 1.0");
}

void vt_host_init(struct vt_host *t, const char *label)
{
	memset(t, 0, sizeof(*t));
	t->label = label;
	t->expect_sender = -2;
	t->h.abi_version = PSL_VAN_ABI_VERSION;
	t->h.size = sizeof(t->h);
	t->h.ctx = t;
	t->h.log_level = vt.verbose ? PSL_VAN_LOG_DEBUG : PSL_VAN_LOG_INFO;
	t->h.vlog = t_vlog;
	t->h.param = t_param;
	t->h.recv = t_recv;
	t->h.send_done = t_send_done;
	t->h.peer_event = t_peer_event;
	t->h.recv_dest = t_recv_dest;
	t->h.recv_dest_put = t_recv_dest_put;
	t->h.proof = t_proof;
	t->h.proof_check = t_proof_check;
	pthread_mutex_init(&t->mu, NULL);
}

void vt_host_make_1_0(struct vt_host *t)
{
	t->h.abi_version = PSL_VAN_ABI_MAKE(1, 0);
	t->h.size = (uint32_t)offsetof(struct psl_van_host, recv_dest);
	t->h.recv_dest = trap_recv_dest;
	t->h.recv_dest_put = trap_recv_dest_put;
}

void vt_host_release(struct vt_host *t)
{
	int i, n;
	struct psl_van_rmsg **held;
	pthread_mutex_lock(&t->mu);
	held = t->held;
	n = t->nheld;
	t->held = NULL;
	t->nheld = t->capheld = 0;
	pthread_mutex_unlock(&t->mu);
	for (i = 0; i < n; i++)
		held[i]->release(held[i]);
	free(held);
}

void vt_host_free(struct vt_host *t)
{
	int i;
	vt_host_release(t);
	for (i = 0; i < t->nloans; i++)
		free(t->loans[i].mem);
	t->nloans = 0;
	free(t->echo_cookies);
	t->echo_cookies = NULL;
	pthread_mutex_destroy(&t->mu);
}

int vt_host_event(struct vt_host *t, int32_t id, int event)
{
	int i, found = -1;
	pthread_mutex_lock(&t->mu);
	for (i = 0; i < t->nev; i++)
		if (t->evs[i].id == id && t->evs[i].event == event) {
			found = i;
			break;
		}
	pthread_mutex_unlock(&t->mu);
	return found;
}

bool vt_host_ok(struct vt_host *t)
{
	return atomic_load(&t->nerr) == 0;
}

/* ------------------------------------------------------------- a node -- */

bool vt_node_up(struct vt_node *n, const char *label, int32_t id, bool bind)
{
	int rc;
	n->v = NULL;
	n->id = id;
	n->port = 0;
	if (!n->t.label) /* a host the caller prepared is kept */
		vt_host_init(&n->t, label);
	rc = vt_ops->init(&n->t.h, &n->v);
	if (rc || !n->v) {
		vt_failf(__LINE__, "%s: init returned %d (%s)%s", label, rc, strerror(-rc),
			 rc ? "" : " but no instance");
		n->v = NULL;
		return false;
	}
	n->t.van = n->v;
	if (bind) {
		struct psl_van_bind_req req = {sizeof(req), 0, "127.0.0.1", 0};
		struct psl_van_bind_res res;
		memset(&res, 0, sizeof(res));
		rc = vt_ops->bind(n->v, &req, &res);
		if (rc) {
			vt_failf(__LINE__, "%s: bind to 127.0.0.1 port 0 returned %d (%s)", label,
				 rc, strerror(-rc));
			return false;
		}
		if (res.port <= 0 || res.port > 65535 || res.addr_len > PSL_VAN_ADDR_MAX) {
			vt_failf(__LINE__, "%s: bind gave port %d, address of %u bytes", label,
				 res.port, res.addr_len);
			return false;
		}
		n->port = res.port;
	}
	return true;
}

void vt_node_down(struct vt_node *n)
{
	if (n->v) {
		vt_ops->fini(n->v);
		n->v = NULL;
		atomic_store(&n->t.closed, true);
	}
}

void vt_node_free(struct vt_node *n)
{
	if (!n->t.label)
		return;
	vt_node_down(n);
	vt_host_free(&n->t);
	n->t.label = NULL;
}

int vt_connect(struct vt_node *from, int32_t id, int port, int32_t my_id)
{
	struct psl_van_peer p = {sizeof(p), id, 0, "127.0.0.1", port, NULL, 0};
	return vt_ops->connect(from->v, &p, my_id);
}

bool vt_link(struct vt_node *a, struct vt_node *b)
{
	int rc = vt_connect(a, b->id, b->port, a->id);
	if (rc) {
		vt_failf(__LINE__, "%s: connect to node %d (port %d) returned %d (%s)", a->t.label,
			 b->id, b->port, rc, strerror(-rc));
		return false;
	}
	rc = vt_connect(b, a->id, a->port, b->id);
	if (rc) {
		vt_failf(__LINE__, "%s: connect to node %d (port %d) returned %d (%s)", b->t.label,
			 a->id, a->port, rc, strerror(-rc));
		return false;
	}
	return true;
}

static pthread_mutex_t orphan_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t **orphans;
static size_t norphans, caporphans;

int vt_send_msg(struct vt_node *from, int32_t to, uint32_t stream, uint32_t seq, uint32_t nseg,
		const size_t *lens, size_t meta_len, uint32_t flags, struct vt_send *s)
{
	struct psl_van_seg segs[VT_MAXSEG];
	uint8_t *meta, *bufs[VT_MAXSEG];
	uint32_t i;
	size_t k;
	int rc;

	if (nseg > VT_MAXSEG)
		return -E2BIG;
	if (meta_len < VT_META_MIN(nseg))
		meta_len = VT_META_MIN(nseg);
	meta = malloc(meta_len);
	if (!meta)
		return -ENOMEM;
	memcpy(meta, "VTM1", 4);
	put32(meta + 4, stream);
	put32(meta + 8, seq);
	put32(meta + 12, nseg);
	put32(meta + 16, (uint32_t)meta_len);
	put32(meta + 20, flags);
	for (i = 0; i < nseg; i++)
		put64(meta + 24 + 8 * i, lens[i]);
	for (k = VT_META_MIN(nseg); k < meta_len; k++)
		meta[k] = vt_pat(vt_seed(stream, seq, 99), k);
	for (i = 0; i < nseg; i++) {
		uint32_t seed = vt_seed(stream, seq, i);
		bufs[i] = malloc(lens[i] ? lens[i] : 1);
		if (!bufs[i]) {
			while (i--)
				free(bufs[i]);
			free(meta);
			return -ENOMEM;
		}
		for (k = 0; k < lens[i]; k++)
			bufs[i][k] = vt_pat(seed, k);
		segs[i] = (struct psl_van_seg){bufs[i], lens[i], PSL_MEM_HOST, -1, NULL};
	}
	if (s) {
		memset(s->bufs, 0, sizeof(s->bufs));
		s->nseg = nseg;
		for (i = 0; i < nseg; i++) {
			s->bufs[i] = bufs[i];
			s->lens[i] = lens[i];
		}
		atomic_init(&s->done, 0);
		atomic_init(&s->status, 0);
	}
	rc = vt_ops->send(from->v, to, meta, meta_len, segs, nseg, s);
	/* meta is copied before send returns: spoil ours to catch a van that
	 * keeps the pointer */
	memset(meta, 0xEE, meta_len);
	free(meta);
	if (!s) /* the van never tells when it is done with these: at exit */
		for (i = 0; i < nseg; i++) {
			if (rc) {
				free(bufs[i]);
				continue;
			}
			pthread_mutex_lock(&orphan_mu);
			if (norphans == caporphans) {
				size_t cap = caporphans ? 2 * caporphans : 64;
				void *p = realloc(orphans, cap * sizeof(*orphans));
				if (p) {
					orphans = p;
					caporphans = cap;
				}
			}
			if (norphans < caporphans)
				orphans[norphans++] = bufs[i];
			pthread_mutex_unlock(&orphan_mu);
		}
	return rc;
}

void vt_orphans_free(void)
{
	size_t i;
	for (i = 0; i < norphans; i++)
		free(orphans[i]);
	free(orphans);
	orphans = NULL;
	norphans = caporphans = 0;
}

void vt_send_free(struct vt_send *s)
{
	uint32_t i;
	for (i = 0; i < s->nseg; i++)
		free(s->bufs[i]);
	s->nseg = 0;
}
