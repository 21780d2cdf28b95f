/*
 * Broken vans, built only for the tests: each is the example van with one
 * promise of the van ABI broken, to show that pslite-vantest catches it
 * (tests/vantest/broken.sh). The breakage sits in a shim between the
 * example van and the host, so the example itself stays whole:
 *   BROKEN_DOUBLE_DONE  send_done twice per send
 *   BROKEN_ORDER        every two messages delivered the other way round
 *   BROKEN_DROP_SEG     the last segment of a message dropped
 *   BROKEN_NO_DOWN      PSL_VAN_PEER_DOWN never reported
 *   BROKEN_HANG         a send with a meta over 60000 bytes never returns
 * BROKEN_NAME is the name (the file is van_<name>.so).
 */
#define _GNU_SOURCE 1 /* as the example wants, before any header */
#include <pslite/van.h>

/* the example's own entry is not exported: this file defines one */
#undef PSL_VAN_DEFINE_ENTRY
#define PSL_VAN_DEFINE_ENTRY(ops)
#define VAN_NAME BROKEN_NAME
#include "../../examples/van_example/van_example.c"

struct shim {
	struct psl_van_host h; /* what the example van sees */
	const struct psl_van_host *real;
	struct psl_van *inner;
	pthread_mutex_t mu;
	struct psl_van_rmsg *held;
};

static pthread_mutex_t shims_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shim *shims[64];

static struct shim *S(void *ctx)
{
	return ctx;
}

static void b_vlog(void *ctx, int level, const char *van, const char *fmt, va_list ap)
{
	S(ctx)->real->vlog(S(ctx)->real->ctx, level, van, fmt, ap);
}

static const char *b_param(void *ctx, const char *name)
{
	return S(ctx)->real->param(S(ctx)->real->ctx, name);
}

static void b_recv(void *ctx, struct psl_van_rmsg *m)
{
	struct shim *s = S(ctx);
#if defined(BROKEN_ORDER)
	struct psl_van_rmsg *prev;
	pthread_mutex_lock(&s->mu);
	prev = s->held;
	s->held = prev ? NULL : m;
	pthread_mutex_unlock(&s->mu);
	if (!prev)
		return;
	s->real->recv(s->real->ctx, m);
	m = prev;
#elif defined(BROKEN_DROP_SEG)
	if (m->nseg > 1)
		m->nseg--;
#endif
	s->real->recv(s->real->ctx, m);
}

static void b_send_done(void *ctx, void *cookie, int status)
{
	struct shim *s = S(ctx);
	s->real->send_done(s->real->ctx, cookie, status);
#ifdef BROKEN_DOUBLE_DONE
	s->real->send_done(s->real->ctx, cookie, status);
#endif
}

static void b_peer_event(void *ctx, int32_t id, int ev, int err, const char *detail)
{
	struct shim *s = S(ctx);
#ifdef BROKEN_NO_DOWN
	if (ev == PSL_VAN_PEER_DOWN)
		return;
#endif
	s->real->peer_event(s->real->ctx, id, ev, err, detail);
}

static int b_recv_dest(void *ctx, int32_t sender, const void *meta, size_t meta_len, uint32_t seg,
		       size_t len, struct psl_van_dest *dest)
{
	return S(ctx)->real->recv_dest(S(ctx)->real->ctx, sender, meta, meta_len, seg, len, dest);
}

static void b_recv_dest_put(void *ctx, void *loan, int status)
{
	S(ctx)->real->recv_dest_put(S(ctx)->real->ctx, loan, status);
}

static int b_proof(void *ctx, const void *msg, size_t len, uint8_t mac[32])
{
	return S(ctx)->real->proof(S(ctx)->real->ctx, msg, len, mac);
}

static int b_proof_check(void *ctx, const void *msg, size_t len, const uint8_t mac[32])
{
	return S(ctx)->real->proof_check(S(ctx)->real->ctx, msg, len, mac);
}

static int b_init(const struct psl_van_host *host, struct psl_van **out)
{
	struct shim *s = calloc(1, sizeof(*s));
	int rc, i;
	if (!s)
		return -ENOMEM;
	s->real = host;
	s->h = *host; /* abi_version, size, log_level as the host says */
	s->h.ctx = s;
	s->h.vlog = b_vlog;
	s->h.param = b_param;
	s->h.recv = b_recv;
	s->h.send_done = b_send_done;
	s->h.peer_event = b_peer_event;
	if (host->size >= PSL_VAN_HOST_SIZE_1_1) {
		s->h.recv_dest = b_recv_dest;
		s->h.recv_dest_put = b_recv_dest_put;
	}
	if (host->size >= PSL_VAN_HOST_SIZE_1_2 && host->proof && host->proof_check) {
		s->h.proof = b_proof;
		s->h.proof_check = b_proof_check;
	}
	pthread_mutex_init(&s->mu, NULL);
	rc = ex_init(&s->h, out);
	if (rc) {
		free(s);
		return rc;
	}
	s->inner = *out;
	pthread_mutex_lock(&shims_mu);
	for (i = 0; i < 64 && shims[i]; i++)
		;
	if (i < 64)
		shims[i] = s;
	pthread_mutex_unlock(&shims_mu);
	return 0;
}

static void b_fini(struct psl_van *v)
{
	struct shim *s = NULL;
	int i;
	pthread_mutex_lock(&shims_mu);
	for (i = 0; i < 64; i++)
		if (shims[i] && shims[i]->inner == v) {
			s = shims[i];
			shims[i] = NULL;
		}
	pthread_mutex_unlock(&shims_mu);
	ex_fini(v);
	if (s) {
		if (s->held)
			s->held->release(s->held);
		free(s);
	}
}

static int b_send(struct psl_van *v, int32_t node_id, const void *meta, size_t meta_len,
		  const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
#ifdef BROKEN_HANG
	while (meta_len > 60000)
		poll(NULL, 0, 1000);
#endif
	return ex_send(v, node_id, meta, meta_len, segs, nseg, cookie);
}

static const struct psl_van_ops broken_ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = BROKEN_NAME,
	.version = "broken " BROKEN_NAME,
	.description = "the example van with one promise broken (tests only)",
	.init = b_init,
	.fini = b_fini,
	.query = ex_query,
	.bind = ex_bind,
	.connect = ex_connect,
	.disconnect = ex_disconnect,
	.send = b_send,
};

PSL_VAN_EXPORT const struct psl_van_ops *PSL_VAN_ENTRY(uint32_t host_abi);
const struct psl_van_ops *PSL_VAN_ENTRY(uint32_t host_abi)
{
	(void)host_abi;
	(void)example_ops;
	return &broken_ops;
}
