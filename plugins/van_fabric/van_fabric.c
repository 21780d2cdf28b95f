/*
 * van_fabric: libfabric reliable-datagram (FI_EP_RDM) endpoints with tagged
 * messages: AWS EFA, and the tcp (ofi_rxm) and sockets providers elsewhere.
 *
 * Bootstrap. Every node listens on a TCP port of its own (the port in the
 * node list; the scheduler's is DMLC_PS_ROOT_PORT) and greets every accepted
 * connection with "PSLVAN1 fabric\n" (van.h). connect() opens one TCP
 * connection to the peer and sends the same greeting plus a hello: its node
 * id, its provider and its endpoint name (fi_getname). The peer answers with
 * its own endpoint name and a stream id. The connection stays open: its end
 * is how a dead peer is noticed (RDM has no connection of its own), and a
 * peer speaking ZeroMQ or another van is told apart by its first bytes. The
 * endpoint name also travels in the node list (bind's addr), but the
 * scheduler is known only by host:port, and the hello works for every peer
 * alike. EC2 hosts have IP, so this works on EFA too.
 *
 * Messages. A header (tag kind HDR, stream id, sequence number) carries the
 * meta and the small parts; larger parts follow as their own tagged messages
 * (kind DATA, same stream and number, part index), sent from the caller's
 * memory and received into buffers that are handed to the core as they are.
 * Headers land in pre-posted buffers; when one arrives the receiver posts
 * receives for the message's large parts. Messages of one stream are handed
 * over in sequence order once complete (fab_oq), whatever order the
 * provider completes them in.
 *
 * Progress. One thread per van reads the completion queue and serves the TCP
 * sockets. It blocks in epoll on the CQ's wait fd (fi_trywait first), an
 * eventfd and the sockets; providers without a wait fd are polled with short
 * sleeps when idle. PS_BUSY_POLL=1 never sleeps. Senders post from their own
 * thread; what the provider cannot take now (-FI_EAGAIN), or what is sent
 * before the peer is reached, waits in the peer's queue, in order.
 */
#include "config.h"

#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "fabric.h"

#define FAB_API FI_VERSION(1, 9)
#define STR2(x) #x
#define STR(x) STR2(x)
#define OQ_WINDOW (1u << 20)
#define HANDSHAKE_MS 10000

enum conn_type { CONN_LISTEN = 1, CONN_OUT, CONN_IN, CONN_WAKE, CONN_CQ };
enum peer_state { P_CONNECTING = 0, P_HANDSHAKE, P_UP, P_DOWN };

struct fab_conn {
	int type;
	int fd;
	uint8_t in[FAB_HELLO_WIRE + 96];
	size_t in_len;
	bool greeted;
	void *owner;
};

struct fab_txop;

/* A node we send to (connect). Freed only at fini. */
struct fab_peer {
	int32_t id, my_id;
	char host[128];
	int port;
	char where[160]; /* "host:port" for messages */
	pthread_mutex_t mu; /* state, queue, seq, inflight */
	int state;
	uint32_t stream, hdr_max;
	fi_addr_t fa;
	uint32_t next_seq;
	struct fab_txop *qhead, *qtail; /* not yet fully posted, in order */
	int inflight;			/* posted, not yet complete */
	atomic_bool retiring;		/* replaced or disconnected */
	/* progress thread only */
	struct fab_conn conn;
	bool hello_sent, bye_sent, told;
	int64_t deadline_ms, retry_at_ms, hs_deadline_ms;
	int retry_ms;
	struct fab_peer *next_all;
	struct fab_peer *next_new;
};

/* A node that sends to us (accepted connection). Progress thread only. */
struct fab_stream {
	uint32_t id;
	int32_t sender;
	char where[64];
	struct fab_conn conn;
	struct fab_oq oq;
	bool open, closing, have_last;
	uint32_t last;
	int64_t close_at;
	struct fab_stream *next_all;
};

struct fab_txpart {
	const void *data;
	uint64_t len;
	bool inl;
	struct fab_mrc_ent *mre;
	void *desc;
	struct fab_ctx ctx;
};

struct fab_txop {
	struct fab_peer *peer;
	void *cookie;
	uint32_t seq, nparts, nposts, posted;
	atomic_int pending; /* posted parts not complete, +1 until all are posted */
	int status;
	struct fab_buf *hdr, *meta;
	size_t hdr_len;
	struct fab_txop *qnext;
	struct fab_txop *lprev, *lnext; /* every live op (fini) */
	struct fab_ctx hctx;
	struct fab_txpart part[];
};

struct fab_rxpart {
	struct fab_buf *buf;
	struct fab_ctx ctx;
};

struct fab_rx {
	struct psl_van_rmsg pub;
	struct fab_oq_ent oq;
	struct fab_buf *hdr;
	uint32_t stream, nparts;
	int pending;
	bool failed, orphan;
	struct fab_rx *next_orphan;
	struct psl_van_rseg *segs;
	struct fab_rxpart part[];
};

struct psl_van {
	const struct psl_van_host *host;
	/* configuration */
	char prov_filter[128];
	char prov[48];	 /* provider chosen at init */
	char avail[160]; /* providers found */
	bool busy_poll, force_mr;
	size_t hdr_buf;
	int rx_depth, linger_ms, connect_ms;
	struct fi_info *hints, *info;
	/* libfabric objects */
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	int cq_fd; /* -1: no wait object */
	bool need_mr, hmem, ep_lock;
	pthread_mutex_t ep_mu;
	uint8_t name[FAB_ADDR_MAX];
	size_t name_len;
	struct fab_pool *pool;
	struct fab_mrc mrc;
	bool mrc_ok;
	/* bootstrap */
	struct fab_conn listen, wake, cqc;
	int epfd;
	int port;
	/* peers we send to */
	pthread_rwlock_t lock; /* peers[] */
	struct fab_peer **peers;
	int npeers;
	pthread_mutex_t mu; /* newpeers, ops list */
	struct fab_peer *newpeers;
	struct fab_peer *all_peers; /* progress thread */
	struct fab_txop ops;	    /* sentinel of the live-op list */
	atomic_int retry;	    /* a queue is waiting for the provider */
	/* streams we receive on (progress thread) */
	struct fab_stream **streams;
	uint32_t nstreams, next_stream;
	struct fab_stream *all_streams;
	struct fab_rx *orphans;
	int hdr_posted;
	int mismatches;
	/* threads */
	pthread_t thread;
	bool running;
	atomic_bool stop, closing;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *param(struct psl_van *v, const char *name, const char *def)
{
	const char *s = v->host->param ? v->host->param(v->host->ctx, name) : NULL;
	return (s && *s) ? s : def;
}

static long param_long(struct psl_van *v, const char *name, long def, long min, long max)
{
	const char *s = param(v, name, NULL);
	char *end;
	long x;
	if (!s)
		return def;
	errno = 0;
	x = strtol(s, &end, 10);
	if (errno || *end || x < min || x > max) {
		LOG(v, PSL_VAN_LOG_WARN, "%s=%s: expected an integer from %ld to %ld; using %ld",
		    name, s, min, max, def);
		return def;
	}
	return x;
}

static void wake(struct psl_van *v)
{
	uint64_t one = 1;
	ssize_t rc = write(v->wake.fd, &one, sizeof(one));
	(void)rc;
}

#define EP_LOCK(v)                                  \
	do {                                        \
		if ((v)->ep_lock)                   \
			pthread_mutex_lock(&(v)->ep_mu); \
	} while (0)
#define EP_UNLOCK(v)                                  \
	do {                                          \
		if ((v)->ep_lock)                     \
			pthread_mutex_unlock(&(v)->ep_mu); \
	} while (0)

/* ---------------------------------------------------- provider choice -- */

/* Providers that are never taken unless FI_PROVIDER names them: shm and
 * udp;ofi_rxd reach only this host or are slow; net is experimental;
 * sockets is for tests. */
static int rank_of(const char *prov)
{
	if (fab_prov_match("shm,ofi_rxd,net", prov))
		return 3;
	if (fab_prov_match("sockets", prov))
		return 2;
	return 1;
}

static struct fi_info *make_hints(bool hmem)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED | FI_SEND | FI_RECV | (hmem ? FI_HMEM : 0);
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_ENDPOINT | (hmem ? FI_MR_HMEM : 0);
	h->domain_attr->threading = FI_THREAD_UNSPEC;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	return h;
}

/* libfabric applies FI_PROVIDER itself, once, when it is first used; the van
 * applies it instead (same syntax), so that it can list what there is when
 * the value matches nothing. */
static pthread_once_t ini_once = PTHREAD_ONCE_INIT;
static void fabric_ini(void)
{
	struct fi_info *h = make_hints(false), *i = NULL;
	Dl_info dl;
	/* libfabric stays loaded once used: some providers (psm's libinfinipath)
	 * leave signal handlers and allocations behind that must outlive an
	 * unload of this van */
	if (dladdr((void *)fi_getinfo, &dl) && dl.dli_fname)
		dlopen(dl.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
	char *saved = getenv("FI_PROVIDER") ? strdup(getenv("FI_PROVIDER")) : NULL;
	if (saved)
		unsetenv("FI_PROVIDER");
	if (h && fi_getinfo(FAB_API, NULL, NULL, 0, h, &i) == 0)
		fi_freeinfo(i);
	if (saved) {
		setenv("FI_PROVIDER", saved, 1);
		free(saved);
	}
	fi_freeinfo(h);
}

/* The best info from list for the filter, or NULL. */
static struct fi_info *pick(struct fi_info *list, const char *filter, const char *exact)
{
	struct fi_info *i, *best = NULL;
	int br = 99;
	for (i = list; i; i = i->next) {
		const char *n = i->fabric_attr->prov_name;
		int r;
		if (exact ? strcmp(n, exact) != 0 : !fab_prov_match(filter, n))
			continue;
		r = *filter || exact ? 0 : rank_of(n);
		if (r < br) {
			best = i;
			br = r;
		}
	}
	return best;
}

static void list_providers(struct fi_info *list, char *out, size_t len)
{
	struct fi_info *i, *j;
	size_t off = 0;
	out[0] = 0;
	for (i = list; i; i = i->next) {
		bool seen = false;
		for (j = list; j != i; j = j->next)
			if (!strcmp(j->fabric_attr->prov_name, i->fabric_attr->prov_name))
				seen = true;
		if (!seen && off < len) {
			int k = snprintf(out + off, len - off, "%s%s", off ? ", " : "",
					 i->fabric_attr->prov_name);
			if (k > 0)
				off += (size_t)k;
		}
	}
}

static int choose_provider(struct psl_van *v)
{
	struct fi_info *list = NULL, *h = NULL, *best;
	int rc;

	pthread_once(&ini_once, fabric_ini);
	h = make_hints(false);
	if (!h)
		return -ENOMEM;
	rc = fi_getinfo(FAB_API, NULL, NULL, 0, h, &list);
	if (rc == -FI_ENODATA || (!rc && !list)) {
		LOG(v, PSL_VAN_LOG_INFO,
		    "libfabric %u.%u found no provider with reliable-datagram (FI_EP_RDM) tagged "
		    "endpoints on this machine",
		    FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
		rc = -ENODEV;
		goto out;
	}
	if (rc) {
		LOG(v, PSL_VAN_LOG_ERROR, "fi_getinfo: %s", fi_strerror(-rc));
		rc = rc == -FI_ENOMEM ? -ENOMEM : -ENODEV;
		goto out;
	}
	list_providers(list, v->avail, sizeof(v->avail));
	best = pick(list, v->prov_filter, NULL);
	if (!best && v->prov_filter[0] != '^' &&
	    fab_prov_match(v->prov_filter, "efa;verbs;psm;psm2;psm3;opx;cxi;usnic")) {
		/* a hardware provider: its device is not on this machine */
		LOG(v, PSL_VAN_LOG_INFO,
		    "FI_PROVIDER=%s: that provider finds no device on this machine (no EFA or "
		    "RDMA adapter, or a libfabric built without it: on AWS, use the libfabric of "
		    "the EFA installer, /opt/amazon/efa); providers here: %s",
		    v->prov_filter, v->avail);
		rc = -ENODEV;
		goto out;
	}
	if (!best) {
		LOG(v, PSL_VAN_LOG_ERROR,
		    "FI_PROVIDER=%s: no libfabric provider of that name offers reliable-datagram "
		    "tagged endpoints here; the ones that do: %s. Set FI_PROVIDER to one of them "
		    "(efa on AWS, tcp elsewhere) or unset it",
		    v->prov_filter, v->avail);
		rc = -EINVAL;
		goto out;
	}
	snprintf(v->prov, sizeof(v->prov), "%s", best->fabric_attr->prov_name);
	v->info = fi_dupinfo(best);
	rc = v->info ? 0 : -ENOMEM;
	/* CUDA memory, where the provider can (EFA with GPUDirect) */
	if (!rc && strcmp(param(v, "PS_FABRIC_HMEM", "1"), "0") != 0) {
		struct fi_info *hh = make_hints(true), *hl = NULL, *hb;
		if (hh) {
			hh->fabric_attr->prov_name = strdup(v->prov);
			if (fi_getinfo(FAB_API, NULL, NULL, 0, hh, &hl) == 0 &&
			    (hb = pick(hl, "", v->prov)) && (hb->caps & FI_HMEM)) {
				fi_freeinfo(v->info);
				v->info = fi_dupinfo(hb);
				v->hmem = true;
				if (!v->info)
					rc = -ENOMEM;
			}
			fi_freeinfo(hl);
			fi_freeinfo(hh);
		}
	}
out:
	fi_freeinfo(list);
	fi_freeinfo(h);
	return rc;
}

/* ---------------------------------------------------------- lifecycle -- */

static int finit(const struct psl_van_host *host, struct psl_van **out)
{
	struct psl_van *v = calloc(1, sizeof(*v));
	int rc;
	if (!v)
		return -ENOMEM;
	v->host = host;
	v->cq_fd = -1;
	v->epfd = -1;
	v->listen.fd = v->wake.fd = -1;
	v->listen.type = CONN_LISTEN;
	v->wake.type = CONN_WAKE;
	v->cqc.type = CONN_CQ;
	v->ops.lnext = v->ops.lprev = &v->ops;
	v->next_stream = 1;
	snprintf(v->prov_filter, sizeof(v->prov_filter), "%s", param(v, "FI_PROVIDER", ""));
	v->busy_poll = param_long(v, "PS_BUSY_POLL", 0, 0, 1) != 0;
	v->force_mr = param_long(v, "PS_FABRIC_MR", 0, 0, 1) != 0;
	v->hdr_buf = (size_t)param_long(v, "PS_FABRIC_INLINE", 8192, 1024, 1 << 20);
	v->rx_depth = (int)param_long(v, "PS_FABRIC_RX_DEPTH", 64, 4, 65536);
	v->linger_ms = (int)param_long(v, "PS_FABRIC_LINGER_MS", 2000, 0, 600000);
	v->connect_ms = 1000 * ((int)param_long(v, "PS_CONNECT_TIMEOUT", 60, 1, 86400) + 5);
	pthread_mutex_init(&v->ep_mu, NULL);
	pthread_mutex_init(&v->mu, NULL);
	pthread_rwlock_init(&v->lock, NULL);
	rc = choose_provider(v);
	if (!rc)
		rc = fab_pool_new(host, (size_t)param_long(v, "PS_FABRIC_POOL_MB", 256, 0, 1 << 20)
						<< 20,
				  &v->pool);
	if (rc) {
		fi_freeinfo(v->info);
		pthread_rwlock_destroy(&v->lock);
		pthread_mutex_destroy(&v->mu);
		pthread_mutex_destroy(&v->ep_mu);
		free(v);
		return rc;
	}
	LOG(v, PSL_VAN_LOG_DEBUG, "provider %s (found: %s)%s", v->prov, v->avail,
	    v->hmem ? ", with CUDA memory (FI_HMEM)" : "");
	*out = v;
	return 0;
}

static int fquery(struct psl_van *v, struct psl_van_caps *caps)
{
	const struct fi_info *i = v->info;
	caps->flags = PSL_VAN_CAP_ZC_SEND | PSL_VAN_CAP_ZC_RECV | PSL_VAN_CAP_MEM_HOST |
		      (v->hmem ? PSL_VAN_CAP_MEM_CUDA : 0);
	caps->max_msg_size = i->ep_attr->max_msg_size;
	/* a long provider list is cut: the return value says by how much */
	int n = snprintf(caps->transports, sizeof(caps->transports),
		 "libfabric %u.%u RDM+tagged providers: %s; using %s on %s%s%s%s%s",
		 FI_MAJOR(fi_version()), FI_MINOR(fi_version()), v->avail, v->prov,
		 i->domain_attr->name,
		 v->ep ? (v->cq_fd >= 0 ? ", CQ wait fd" : ", CQ polled") : "",
		 (i->domain_attr->mr_mode & FI_MR_LOCAL) || v->force_mr ? ", registered buffers"
									: "",
		 v->hmem ? ", CUDA memory (FI_HMEM)" : "", v->busy_poll ? ", busy polling" : "");
	return n < 0 ? -EIO : 0;
}

/* ------------------------------------------------------------- memory -- */

static int mr_reg(void *ctx, void *addr, size_t len, int32_t mem_type, int32_t dev_id,
		  void **mr, void **desc)
{
	struct psl_van *v = ctx;
	struct fi_mr_attr a;
	struct iovec iov = {addr, len};
	struct fid_mr *m = NULL;
	int rc;

	memset(&a, 0, sizeof(a));
	a.mr_iov = &iov;
	a.iov_count = 1;
	a.access = FI_SEND | FI_RECV;
	a.iface = mem_type == PSL_MEM_CUDA ? FI_HMEM_CUDA : FI_HMEM_SYSTEM;
	if (mem_type == PSL_MEM_CUDA)
		a.device.cuda = dev_id;
	rc = fi_mr_regattr(v->domain, &a, 0, &m);
	if (!rc && (v->info->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
		rc = fi_mr_bind(m, &v->ep->fid, 0);
		if (!rc)
			rc = fi_mr_enable(m);
	}
	if (rc) {
		if (m)
			fi_close(&m->fid);
		LOG(v, PSL_VAN_LOG_ERROR,
		    "cannot register %zu bytes of %s memory at %p: %s%s", len,
		    mem_type == PSL_MEM_CUDA ? "CUDA" : "host", addr, fi_strerror(-rc),
		    mem_type == PSL_MEM_CUDA ? " (GPUDirect RDMA needs the provider's CUDA "
					       "support and the nvidia peermem module)"
					     : " (raise 'ulimit -l', the locked-memory limit)");
		return rc == -FI_ENOMEM ? -ENOMEM : -EIO;
	}
	*mr = m;
	*desc = fi_mr_desc(m);
	return 0;
}

static void mr_dereg(void *ctx, void *mr)
{
	(void)ctx;
	if (mr)
		fi_close(&((struct fid_mr *)mr)->fid);
}

static int freg_mem(struct psl_van *v, void *addr, size_t len, int32_t mem_type, int32_t dev_id,
		    void **mr)
{
	struct fab_mrc_ent *e;
	int rc;
	if (!v->mrc_ok)
		return -EAGAIN; /* before bind */
	if (mem_type == PSL_MEM_CUDA && !v->hmem) {
		LOG(v, PSL_VAN_LOG_ERROR,
		    "cannot register CUDA memory: provider %s has no FI_HMEM support here "
		    "(EFA with GPUDirect RDMA has it)",
		    v->prov);
		return -EINVAL;
	}
	rc = fab_mrc_get(&v->mrc, addr, len, mem_type, dev_id, &e);
	if (!rc)
		*mr = e;
	return rc;
}

static int fdereg_mem(struct psl_van *v, void *mr)
{
	struct fab_mrc_ent *e = mr;
	if (!e)
		return -EINVAL;
	fab_mrc_put(&v->mrc, e);
	return 0;
}

/* ---------------------------------------------------------------- send -- */

static void op_unlink(struct psl_van *v, struct fab_txop *op)
{
	pthread_mutex_lock(&v->mu);
	op->lprev->lnext = op->lnext;
	op->lnext->lprev = op->lprev;
	pthread_mutex_unlock(&v->mu);
}

static void op_free(struct psl_van *v, struct fab_txop *op)
{
	uint32_t i;
	for (i = 0; i < op->nparts; i++)
		if (op->part[i].mre)
			fab_mrc_put(&v->mrc, op->part[i].mre);
	fab_pool_put(op->hdr);
	fab_pool_put(op->meta);
	free(op);
}

/* Every part of op is complete (or failed): tell the core. */
static void op_finish(struct psl_van *v, struct fab_txop *op)
{
	struct fab_peer *p = op->peer;
	pthread_mutex_lock(&p->mu);
	p->inflight--;
	pthread_mutex_unlock(&p->mu);
	op_unlink(v, op);
	if (op->cookie)
		v->host->send_done(v->host->ctx, op->cookie, op->status);
	op_free(v, op);
}

static void op_done_one(struct psl_van *v, struct fab_txop *op, int status)
{
	if (status && !op->status)
		op->status = status;
	if (atomic_fetch_sub(&op->pending, 1) == 1)
		op_finish(v, op);
}

/* Posts what is left of the ops queued on p, in order. p->mu held. Returns
 * 0 when the queue is empty, -EAGAIN when the provider is full. */
static int post_queue(struct psl_van *v, struct fab_peer *p)
{
	struct fab_txop *op;
	while ((op = p->qhead)) {
		while (op->posted < op->nposts) {
			ssize_t rc;
			uint32_t k = op->posted;
			/* counted before posting: the completion may come first */
			atomic_fetch_add(&op->pending, 1);
			if (k == 0) {
				EP_LOCK(v);
				rc = fi_tsend(v->ep, op->hdr->data, op->hdr_len, op->hdr->desc,
					      p->fa, fab_tag(FAB_KIND_HDR, p->stream, op->seq, 0),
					      &op->hctx);
				EP_UNLOCK(v);
			} else {
				/* the k-th part that is not inline */
				uint32_t i, n = 0;
				struct fab_txpart *tp = NULL;
				for (i = 0; i < op->nparts; i++)
					if (!op->part[i].inl && ++n == k) {
						tp = &op->part[i];
						break;
					}
				EP_LOCK(v);
				rc = fi_tsend(v->ep, tp->data, tp->len, tp->desc, p->fa,
					      fab_tag(FAB_KIND_DATA, p->stream, op->seq, i),
					      &tp->ctx);
				EP_UNLOCK(v);
			}
			LOG(v, PSL_VAN_LOG_TRACE, "node %d: posted part %u of message %u: %zd", p->id,
			    k, op->seq, rc);
			if (rc)
				atomic_fetch_sub(&op->pending, 1); /* the posting ref stays */
			if (rc == -FI_EAGAIN) {
				atomic_store(&v->retry, 1);
				return -EAGAIN;
			}
			if (rc) {
				LOG(v, PSL_VAN_LOG_ERROR, "fi_tsend to node %d (%s): %s", p->id,
				    p->where, fi_strerror((int)-rc));
				op->status = -EIO;
				op->nposts = op->posted; /* the rest is not sent */
				break;
			}
			op->posted++;
		}
		p->qhead = op->qnext;
		if (!p->qhead)
			p->qtail = NULL;
		p->inflight++;
		/* drop the posting reference; completions may already be in */
		if (atomic_fetch_sub(&op->pending, 1) == 1) {
			pthread_mutex_unlock(&p->mu);
			op_finish(v, op);
			pthread_mutex_lock(&p->mu);
		}
	}
	return 0;
}

/* Fails every queued op of p with err (p->mu held; sends done unlocked). */
static void fail_queue(struct psl_van *v, struct fab_peer *p, int err)
{
	while (p->qhead) {
		struct fab_txop *op = p->qhead;
		p->qhead = op->qnext;
		if (!p->qhead)
			p->qtail = NULL;
		p->inflight++; /* op_finish takes it off again */
		op->status = err;
		/* parts already posted complete later and finish the op */
		if (atomic_fetch_sub(&op->pending, 1) == 1) {
			pthread_mutex_unlock(&p->mu);
			op_finish(v, op);
			pthread_mutex_lock(&p->mu);
		}
	}
}

static int check_segs(struct psl_van *v, const struct psl_van_seg *segs, uint32_t nseg)
{
	uint32_t i;
	if (nseg >= FAB_MAX_PARTS) {
		LOG(v, PSL_VAN_LOG_ERROR, "a message of %u segments: the fabric van carries at "
					  "most %d",
		    nseg, FAB_MAX_PARTS - 1);
		return -EMSGSIZE;
	}
	for (i = 0; i < nseg; i++) {
		if (segs[i].mem_type == PSL_MEM_HOST)
			continue;
		if (segs[i].mem_type == PSL_MEM_CUDA && v->hmem)
			continue;
		LOG(v, PSL_VAN_LOG_ERROR,
		    "segment %u is %s memory, which provider %s cannot send here (no FI_HMEM): "
		    "use EFA with GPUDirect RDMA, or copy to host memory first",
		    i, segs[i].mem_type == PSL_MEM_CUDA ? "CUDA" : "unknown", v->prov);
		return -EINVAL;
	}
	return 0;
}

static int fsend(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		 const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	uint32_t nparts = nseg + 1, i;
	uint64_t lens[FAB_MAX_PARTS];
	bool inl[FAB_MAX_PARTS];
	size_t off[FAB_MAX_PARTS], room;
	struct fab_txop *op;
	struct fab_peer *p;
	int rc;

	if (atomic_load(&v->closing) || !v->ep)
		return -ESHUTDOWN;
	rc = check_segs(v, segs, nseg);
	if (rc)
		return rc;
	pthread_rwlock_rdlock(&v->lock);
	p = (id >= 0 && id < v->npeers) ? v->peers[id] : NULL;
	pthread_rwlock_unlock(&v->lock);
	if (!p)
		return -EHOSTUNREACH;
	op = calloc(1, sizeof(*op) + nparts * sizeof(op->part[0]));
	if (!op)
		return -ENOMEM;
	op->peer = p;
	op->cookie = cookie;
	op->nparts = nparts;
	atomic_init(&op->pending, 1);
	op->hctx.kind = CTX_TX_HDR;
	op->hctx.obj = op;
	op->part[0].data = meta;
	op->part[0].len = meta_len;
	for (i = 0; i < nseg; i++) {
		op->part[i + 1].data = segs[i].data;
		op->part[i + 1].len = segs[i].len;
	}
	/* inline what fits in the peer's header buffer, in order: the meta and
	 * small segments; anything past that goes on its own */
	pthread_mutex_lock(&p->mu);
	room = p->state == P_UP ? p->hdr_max : 1024; /* the least any node posts */
	pthread_mutex_unlock(&p->mu);
	if (room > v->hdr_buf)
		room = v->hdr_buf;
	for (i = 0; i < nparts; i++) {
		lens[i] = op->part[i].len;
		inl[i] = lens[i] == 0;
	}
	for (i = 0; i < nparts; i++) {
		inl[i] = true;
		if (fab_hdr_size(nparts, lens, inl) > room)
			inl[i] = lens[i] == 0;
	}
	op->nposts = 1;
	for (i = 0; i < nparts; i++) {
		struct fab_txpart *tp = &op->part[i];
		tp->inl = inl[i];
		tp->ctx.kind = CTX_TX_PART;
		tp->ctx.part = (uint8_t)i;
		tp->ctx.obj = op;
		if (tp->inl)
			continue;
		op->nposts++;
		if (i == 0) { /* the meta is copied: the caller may reuse it at once */
			rc = fab_pool_get(v->pool, meta_len, &op->meta);
			if (rc)
				goto fail;
			memcpy(op->meta->data, meta, meta_len);
			tp->data = op->meta->data;
			tp->desc = op->meta->desc;
		} else if (segs[i - 1].mr) {
			tp->desc = ((struct fab_mrc_ent *)segs[i - 1].mr)->desc;
		} else if (v->need_mr || segs[i - 1].mem_type != PSL_MEM_HOST) {
			rc = fab_mrc_get(&v->mrc, tp->data, tp->len, segs[i - 1].mem_type,
					 segs[i - 1].dev_id, &tp->mre);
			if (rc)
				goto fail;
			tp->desc = tp->mre->desc;
		}
	}
	rc = fab_pool_get(v->pool, fab_hdr_size(nparts, lens, inl), &op->hdr);
	if (rc)
		goto fail;

	pthread_mutex_lock(&v->mu);
	op->lnext = v->ops.lnext;
	op->lprev = &v->ops;
	v->ops.lnext->lprev = op;
	v->ops.lnext = op;
	pthread_mutex_unlock(&v->mu);

	pthread_mutex_lock(&p->mu);
	if (p->state == P_DOWN || atomic_load(&p->retiring)) {
		pthread_mutex_unlock(&p->mu);
		op_unlink(v, op);
		rc = p->state == P_DOWN ? -ECONNRESET : -EHOSTUNREACH;
		goto fail;
	}
	op->seq = p->next_seq++;
	op->hdr_len = fab_hdr_write(op->hdr->data, op->seq, nparts, lens, inl, off);
	for (i = 0; i < nparts; i++)
		if (inl[i] && lens[i])
			memcpy(op->hdr->data + off[i], op->part[i].data, lens[i]);
	if (p->qtail)
		p->qtail->qnext = op;
	else
		p->qhead = op;
	p->qtail = op;
	if (p->state == P_UP && post_queue(v, p) == -EAGAIN)
		wake(v);
	pthread_mutex_unlock(&p->mu);
	return 0;
fail:
	op_free(v, op);
	return rc;
}

/* ------------------------------------------------------------- receive -- */

static void rx_free(struct fab_rx *r)
{
	uint32_t i;
	for (i = 0; i < r->nparts; i++)
		fab_pool_put(r->part[i].buf);
	fab_pool_put(r->hdr);
	free(r);
}

static void rx_release(struct psl_van_rmsg *pub)
{
	rx_free((struct fab_rx *)pub);
}

static int post_hdr(struct psl_van *v)
{
	struct fab_buf *b;
	ssize_t rc;
	int e = fab_pool_get(v->pool, v->hdr_buf, &b);
	if (e)
		return e;
	b->ctx.kind = CTX_RX_HDR;
	b->ctx.obj = b;
	b->posted = true;
	EP_LOCK(v);
	rc = fi_trecv(v->ep, b->data, v->hdr_buf, b->desc, FI_ADDR_UNSPEC, FAB_HDR_TAG,
		      FAB_HDR_IGNORE, &b->ctx);
	EP_UNLOCK(v);
	if (rc) {
		fab_pool_put(b);
		return rc == -FI_EAGAIN ? -EAGAIN : -EIO;
	}
	v->hdr_posted++;
	return 0;
}

static void refill_hdr(struct psl_van *v)
{
	while (v->hdr_posted < v->rx_depth)
		if (post_hdr(v))
			break;
}

static struct fab_stream *stream_get(struct psl_van *v, uint32_t id)
{
	return id < v->nstreams ? v->streams[id] : NULL;
}

/* Hands over every message of s that is next in order and complete. */
static void deliver(struct psl_van *v, struct fab_stream *s)
{
	struct fab_oq_ent *e;
	while ((e = fab_oq_pop(&s->oq))) {
		struct fab_rx *r = (struct fab_rx *)((char *)e - offsetof(struct fab_rx, oq));
		if (r->failed) {
			rx_free(r);
			continue;
		}
		v->host->recv(v->host->ctx, &r->pub);
	}
}

static void rx_part_done(struct psl_van *v, struct fab_rx *r, int err)
{
	struct fab_stream *s;
	if (err)
		r->failed = true;
	if (--r->pending > 0)
		return;
	if (r->orphan) {
		struct fab_rx **pp = &v->orphans;
		while (*pp && *pp != r)
			pp = &(*pp)->next_orphan;
		if (*pp)
			*pp = r->next_orphan;
		rx_free(r);
		return;
	}
	r->oq.complete = true;
	s = stream_get(v, r->stream);
	if (s)
		deliver(v, s);
}

static void on_hdr(struct psl_van *v, struct fab_buf *b, uint64_t tag, size_t len)
{
	struct fab_hdr_view h;
	struct fab_stream *s = stream_get(v, fab_tag_stream(tag));
	struct fab_rx *r;
	char why[160];
	uint32_t i, nseg;
	int rc;

	if (!s || !s->open) {
		LOG(v, PSL_VAN_LOG_WARN, "dropped a message on unknown stream %u",
		    fab_tag_stream(tag));
		fab_pool_put(b);
		return;
	}
	rc = fab_hdr_parse(b->data, len, &h, why, sizeof(why));
	if (!rc && h.seq != fab_tag_seq(tag)) {
		snprintf(why, sizeof(why), "sequence number %u in a header tagged %u", h.seq,
			 fab_tag_seq(tag));
		rc = -EPROTO;
	}
	if (rc) {
		LOG(v, PSL_VAN_LOG_WARN, "dropped a malformed message from node %d (%s): %s",
		    s->sender, s->where, why);
		fab_pool_put(b);
		return;
	}
	nseg = h.nparts - 1;
	r = calloc(1, sizeof(*r) + h.nparts * sizeof(r->part[0]) +
			      (nseg ? nseg : 1) * sizeof(struct psl_van_rseg));
	if (!r) {
		fab_pool_put(b);
		return;
	}
	r->segs = (struct psl_van_rseg *)&r->part[h.nparts];
	r->hdr = b;
	r->stream = s->id;
	r->nparts = h.nparts;
	r->pending = 1;
	r->oq.seq = h.seq;
	r->pub.sender = s->sender;
	r->pub.nseg = nseg;
	r->pub.segs = r->segs;
	r->pub.release = rx_release;
	for (i = 0; i < h.nparts; i++) {
		void *data;
		if (h.inl[i]) {
			data = b->data + h.off[i];
		} else {
			ssize_t prc;
			rc = fab_pool_get(v->pool, (size_t)h.len[i], &r->part[i].buf);
			if (rc) {
				LOG(v, PSL_VAN_LOG_ERROR,
				    "no memory for a %llu-byte part from node %d: message dropped",
				    (unsigned long long)h.len[i], s->sender);
				r->failed = true;
				break;
			}
			data = r->part[i].buf->data;
			r->part[i].ctx.kind = CTX_RX_PART;
			r->part[i].ctx.part = (uint8_t)i;
			r->part[i].ctx.obj = r;
			for (int tries = 0;; tries++) {
				EP_LOCK(v);
				prc = fi_trecv(v->ep, data, (size_t)h.len[i], r->part[i].buf->desc,
					       FI_ADDR_UNSPEC,
					       fab_tag(FAB_KIND_DATA, s->id, h.seq, i), 0,
					       &r->part[i].ctx);
				EP_UNLOCK(v);
				if (prc != -FI_EAGAIN || tries == 100000)
					break;
				EP_LOCK(v);
				fi_cq_read(v->cq, NULL, 0); /* progress, then again */
				EP_UNLOCK(v);
			}
			if (prc) {
				LOG(v, PSL_VAN_LOG_ERROR, "fi_trecv: %s: message from node %d dropped",
				    fi_strerror((int)-prc), s->sender);
				r->failed = true;
				break;
			}
			r->pending++;
		}
		if (i == 0) {
			r->pub.meta = data;
			r->pub.meta_len = (size_t)h.len[0];
		} else {
			r->segs[i - 1] = (struct psl_van_rseg){data, (size_t)h.len[i], PSL_MEM_HOST,
							       -1};
		}
	}
	rc = fab_oq_add(&s->oq, &r->oq, OQ_WINDOW);
	if (rc) {
		LOG(v, PSL_VAN_LOG_WARN, "dropped message %u from node %d: %s", h.seq, s->sender,
		    rc == -EEXIST ? "a duplicate" : "too far ahead");
		r->orphan = true;
		r->next_orphan = v->orphans;
		v->orphans = r;
	}
	rx_part_done(v, r, 0); /* the header's own reference */
}

/* ------------------------------------------------------------ completions -- */

static void report_down(struct psl_van *v, struct fab_peer *p, int err, const char *detail)
{
	bool tell;
	pthread_mutex_lock(&p->mu);
	tell = p->state == P_UP && !atomic_load(&p->retiring) && !p->told;
	p->state = P_DOWN;
	p->told = p->told || tell;
	fail_queue(v, p, err);
	pthread_mutex_unlock(&p->mu);
	if (tell && !atomic_load(&v->closing))
		v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_DOWN, err, detail);
}

static void on_error(struct psl_van *v, struct fi_cq_err_entry *e)
{
	struct fab_ctx *c = e->op_context;
	int err = e->err == FI_ECANCELED ? -ECANCELED : -EIO;
	char detail[256];

	if (!c)
		return;
	switch (c->kind) {
	case CTX_TX_HDR:
	case CTX_TX_PART: {
		struct fab_txop *op = c->obj;
		struct fab_peer *p = op->peer;
		if (e->err != FI_ECANCELED) {
			snprintf(detail, sizeof(detail), "sending to %s failed: %s", p->where,
				 fi_cq_strerror(v->cq, e->prov_errno, e->err_data, NULL, 0));
			LOG(v, PSL_VAN_LOG_DEBUG, "node %d: %s", p->id, detail);
			if (e->err != FI_ETRUNC)
				report_down(v, p, -ECONNRESET, detail);
		}
		op_done_one(v, op, err);
		break;
	}
	case CTX_RX_HDR:
		v->hdr_posted--;
		((struct fab_buf *)c->obj)->posted = false;
		if (e->err != FI_ECANCELED)
			LOG(v, PSL_VAN_LOG_WARN, "a receive failed: %s",
			    fi_cq_strerror(v->cq, e->prov_errno, e->err_data, NULL, 0));
		fab_pool_put(c->obj);
		break;
	case CTX_RX_PART:
		if (e->err != FI_ECANCELED)
			LOG(v, PSL_VAN_LOG_WARN, "receiving part %u failed: %s", c->part,
			    fi_cq_strerror(v->cq, e->prov_errno, e->err_data, NULL, 0));
		rx_part_done(v, c->obj, err);
		break;
	}
}

static void on_completion(struct psl_van *v, struct fi_cq_tagged_entry *e)
{
	struct fab_ctx *c = e->op_context;
	switch (c->kind) {
	case CTX_TX_HDR:
	case CTX_TX_PART:
		op_done_one(v, c->obj, 0);
		break;
	case CTX_RX_HDR:
		v->hdr_posted--;
		((struct fab_buf *)c->obj)->posted = false;
		on_hdr(v, c->obj, e->tag, e->len);
		break;
	case CTX_RX_PART:
		rx_part_done(v, c->obj, 0);
		break;
	}
}

/* Reads the CQ until it is empty; returns how many entries were handled. */
static int drain_cq(struct psl_van *v)
{
	struct fi_cq_tagged_entry ent[32];
	int total = 0;
	for (;;) {
		ssize_t n, i;
		EP_LOCK(v);
		n = fi_cq_read(v->cq, ent, 32);
		EP_UNLOCK(v);
		if (n == -FI_EAGAIN)
			break;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			EP_LOCK(v);
			n = fi_cq_readerr(v->cq, &err, 0);
			EP_UNLOCK(v);
			if (n == 1)
				on_error(v, &err);
			total++;
			continue;
		}
		if (n < 0) {
			LOG(v, PSL_VAN_LOG_ERROR, "fi_cq_read: %s", fi_strerror((int)-n));
			break;
		}
		for (i = 0; i < n; i++)
			on_completion(v, &ent[i]);
		total += (int)n;
	}
	if (total)
		refill_hdr(v);
	return total;
}

/* ---------------------------------------------------------- bootstrap -- */

static int ep_add(struct psl_van *v, struct fab_conn *c, uint32_t events)
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
	static const char g[] = PSL_VAN_GREETING VAN "\n";
	return fab_write_all(fd, g, sizeof(g) - 1);
}

static int send_hello(int fd, const struct fab_hello *h)
{
	uint8_t buf[FAB_HELLO_WIRE];
	fab_hello_pack(h, buf);
	return fab_write_all(fd, buf, sizeof(buf));
}

/* Reads the greeting. 1: done, 0: need more, <0: not a fabric van (what[]
 * says what it is). */
static int read_greeting(struct fab_conn *c, char *what, size_t wlen)
{
	char name[64];
	size_t used = 0;
	switch (fab_greet_parse(c->in, c->in_len, name, sizeof(name), &used)) {
	case FAB_GREET_MORE:
		return 0;
	case FAB_GREET_ZMTP:
		snprintf(what, wlen, "ZeroMQ (van zmq, or a C++ ps-lite node)");
		return -EPROTO;
	case FAB_GREET_OK:
		consume(c, used);
		c->greeted = true;
		if (strcmp(name, VAN) != 0) {
			snprintf(what, wlen, "van %s", name);
			return -EPROTO;
		}
		return 1;
	default:
		snprintf(what, wlen, "something that is not a pslite van");
		return -EPROTO;
	}
}

static void peer_mismatch(struct psl_van *v, struct fab_peer *p, const char *detail)
{
	pthread_mutex_lock(&p->mu);
	p->state = P_DOWN;
	p->told = true;
	fail_queue(v, p, -EPROTO);
	pthread_mutex_unlock(&p->mu);
	conn_close(v, &p->conn);
	/* the core reports it, naming the node */
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d: %s", p->id, detail);
	if (!atomic_load(&p->retiring))
		v->host->peer_event(v->host->ctx, p->id, PSL_VAN_PEER_MISMATCH, -EPROTO, detail);
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
	p->hs_deadline_ms = now + HANDSHAKE_MS;
	p->hello_sent = false;
	p->conn.greeted = false;
	/* the greeting and hello go out once the connection is made */
	ep_add(v, &p->conn, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
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

static void peer_io(struct psl_van *v, struct fab_peer *p, uint32_t events)
{
	int64_t now = now_ms();
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
			if (send_greeting(p->conn.fd) || send_hello(p->conn.fd, &h)) {
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
					snprintf(detail, sizeof(detail),
						 "the node at %s speaks %s; this node runs van "
						 "fabric",
						 p->where, what);
					peer_mismatch(v, p, detail);
					return;
				}
			}
			if (p->conn.greeted && p->conn.in_len >= FAB_HELLO_WIRE) {
				rc = fab_hello_unpack(p->conn.in, &h);
				consume(&p->conn, FAB_HELLO_WIRE);
				if (rc || h.kind == FAB_REFUSE || h.kind != FAB_ACCEPT) {
					snprintf(detail, sizeof(detail),
						 "the fabric van at %s refused this node: %s", p->where,
						 rc ? "its answer is malformed (another pslite version?)"
						 : h.text[0] ? h.text : "no reason given");
					peer_mismatch(v, p, detail);
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
					if (post_queue(v, p) == -EAGAIN)
						wake(v);
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
			report_down(v, p, -ECONNRESET, detail);
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
		if (!stream_get(v, id))
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
static void stream_free(struct psl_van *v, struct fab_stream *s)
{
	struct fab_stream **pp;
	struct fab_oq_ent *e = s->oq.head;
	conn_close(v, &s->conn);
	while (e) {
		struct fab_rx *r = (struct fab_rx *)((char *)e - offsetof(struct fab_rx, oq));
		uint32_t i;
		e = e->next;
		if (r->pending == 0) {
			rx_free(r);
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

static void stream_io(struct psl_van *v, struct fab_stream *s, uint32_t events)
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
			    "a node at %s that speaks %s connected to this node, which runs van "
			    "fabric: start every node with the same DMLC_ENABLE_RDMA",
			    s->where, what);
			stream_free(v, s);
			return;
		}
	}
	while (s->conn.greeted && s->conn.in_len >= FAB_HELLO_WIRE) {
		rc = fab_hello_unpack(s->conn.in, &h);
		consume(&s->conn, FAB_HELLO_WIRE);
		if (rc) {
			LOG(v, PSL_VAN_LOG_WARN, "a malformed hello from %s: closed", s->where);
			stream_free(v, s);
			return;
		}
		if (h.kind == FAB_BYE) {
			s->closing = true;
			s->have_last = true;
			s->last = h.seq;
			s->close_at = now_ms() + 2000;
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
			send_hello(s->conn.fd, &a);
			stream_free(v, s);
			return;
		}
		a.kind = FAB_ACCEPT;
		a.stream = s->id;
		a.addr_len = (uint32_t)v->name_len;
		memcpy(a.addr, v->name, v->name_len);
		if (send_hello(s->conn.fd, &a)) {
			stream_free(v, s);
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
			stream_free(v, s);
			return;
		}
		if (!s->closing) {
			s->closing = true;
			s->close_at = now_ms() + 2000;
		}
	}
}

static void on_accept(struct psl_van *v)
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
		s->close_at = now_ms() + HANDSHAKE_MS;
		if (send_greeting(fd) || ep_add(v, &s->conn, EPOLLIN | EPOLLRDHUP)) {
			stream_free(v, s);
			continue;
		}
	}
}

/* Timers and state changes; returns the epoll timeout to use. */
static int housekeeping(struct psl_van *v)
{
	int64_t now = now_ms(), next = now + 60000;
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
		pthread_mutex_lock(&p->mu);
		st = p->state;
		if (atomic_load(&p->retiring) && st == P_UP && !p->qhead && !p->inflight &&
		    !p->bye_sent && p->conn.fd >= 0) {
			struct fab_hello b;
			memset(&b, 0, sizeof(b));
			b.kind = FAB_BYE;
			b.seq = p->next_seq;
			send_hello(p->conn.fd, &b);
			p->bye_sent = true;
			p->state = P_DOWN;
			st = P_DOWN;
			pthread_mutex_unlock(&p->mu);
			conn_close(v, &p->conn);
			continue;
		}
		if (st == P_UP && p->qhead && post_queue(v, p) == -EAGAIN)
			next = now;
		pthread_mutex_unlock(&p->mu);
		if (st == P_CONNECTING && p->conn.fd < 0 && !atomic_load(&p->retiring)) {
			if (now >= p->deadline_ms) {
				char detail[256];
				snprintf(detail, sizeof(detail),
					 "cannot reach %s within PS_CONNECT_TIMEOUT (+5 s): is the node "
					 "running, and is the address right?",
					 p->where);
				pthread_mutex_lock(&p->mu);
				p->state = P_DOWN;
				fail_queue(v, p, -EHOSTUNREACH);
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
				char detail[512];
				snprintf(detail, sizeof(detail),
					 "the node at %s accepted the connection but did not greet "
					 "within %d s: it does not run a pslite van (or runs an old "
					 "one)",
					 p->where, HANDSHAKE_MS / 1000);
				peer_mismatch(v, p, detail);
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
				stream_free(v, s);
			} else if (s->close_at < next) {
				next = s->close_at;
			}
			continue;
		}
		if (!s->closing)
			continue;
		if ((s->have_last && s->oq.next == s->last && !s->oq.head) || now >= s->close_at)
			stream_free(v, s);
		else if (s->close_at < next)
			next = s->close_at;
	}
	if (atomic_load(&v->retry))
		return 1;
	return next <= now ? 0 : (int)(next - now);
}

/* ------------------------------------------------------ progress thread -- */

static void *progress_main(void *arg)
{
	struct psl_van *v = arg;
	struct epoll_event evs[32];
	int idle = 0;

	while (!atomic_load(&v->stop)) {
		int n, i, timeout, got;
		atomic_store(&v->retry, 0);
		got = drain_cq(v);
		timeout = housekeeping(v);
		if (got || atomic_load(&v->retry)) {
			idle = 0;
			timeout = 0;
		}
		if (v->busy_poll) {
			timeout = 0;
		} else if (timeout != 0 && v->cq_fd >= 0) {
			struct fid *f = &v->cq->fid;
			int rc;
			EP_LOCK(v);
			rc = fi_trywait(v->fabric, &f, 1);
			EP_UNLOCK(v);
			if (rc == -FI_EAGAIN)
				timeout = 0;
		} else if (timeout != 0) {
			/* no wait object: poll, sleeping a little once idle */
			if (++idle < 200)
				timeout = 0;
			else if (timeout < 0 || timeout > 1)
				timeout = 1;
		}
		n = epoll_wait(v->epfd, evs, 32, timeout);
		for (i = 0; i < n; i++) {
			struct fab_conn *c = evs[i].data.ptr;
			switch (c->type) {
			case CONN_WAKE: {
				uint64_t x;
				ssize_t r = read(c->fd, &x, sizeof(x));
				(void)r;
				break;
			}
			case CONN_CQ:
				break; /* drained at the top */
			case CONN_LISTEN:
				on_accept(v);
				break;
			case CONN_OUT:
				peer_io(v, c->owner, evs[i].events);
				break;
			case CONN_IN:
				/* the stream may have been freed by an earlier event */
				if (c->fd >= 0)
					stream_io(v, c->owner, evs[i].events);
				break;
			}
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- bind -- */

static int open_fabric(struct psl_van *v, const char *host)
{
	struct fi_info *info = v->info, *found = NULL;
	struct fi_cq_attr cqa;
	struct fi_av_attr ava;
	char num[64];
	int rc;

	/* IP-based providers: an endpoint on the interface of the bind address */
	if (info->addr_format == FI_SOCKADDR_IN || info->addr_format == FI_SOCKADDR ||
	    info->addr_format == FI_SOCKADDR_IN6) {
		struct fi_info *h = fi_dupinfo(v->info), *sel;
		fab_numeric_host(host, num, sizeof(num));
		if (h) {
			free(h->src_addr);
			h->src_addr = NULL;
			h->src_addrlen = 0;
			h->addr_format = FI_FORMAT_UNSPEC;
			free(h->domain_attr->name);
			h->domain_attr->name = NULL;
			free(h->fabric_attr->name);
			h->fabric_attr->name = NULL;
			if (fi_getinfo(FAB_API, num, "0", FI_SOURCE, h, &found) == 0 &&
			    (sel = pick(found, "", v->prov)))
				info = sel;
			fi_freeinfo(h);
		}
	}
	rc = fi_fabric(info->fabric_attr, &v->fabric, NULL);
	if (rc)
		goto out;
	rc = fi_domain(v->fabric, info, &v->domain, NULL);
	if (rc)
		goto out;
	memset(&cqa, 0, sizeof(cqa));
	cqa.format = FI_CQ_FORMAT_TAGGED;
	cqa.size = (size_t)v->rx_depth * 4 + 4096;
	cqa.wait_obj = v->busy_poll ? FI_WAIT_NONE : FI_WAIT_FD;
	rc = fi_cq_open(v->domain, &cqa, &v->cq, NULL);
	if (rc && cqa.wait_obj == FI_WAIT_FD) {
		LOG(v, PSL_VAN_LOG_INFO,
		    "provider %s has no file descriptor to wait on its completion queue (%s): "
		    "polling it, with 1 ms sleeps when idle",
		    v->prov, fi_strerror(-rc));
		cqa.wait_obj = FI_WAIT_NONE;
		rc = fi_cq_open(v->domain, &cqa, &v->cq, NULL);
	}
	if (rc)
		goto out;
	if (cqa.wait_obj == FI_WAIT_FD && fi_control(&v->cq->fid, FI_GETWAIT, &v->cq_fd) != 0)
		v->cq_fd = -1;
	memset(&ava, 0, sizeof(ava));
	ava.type = FI_AV_TABLE;
	rc = fi_av_open(v->domain, &ava, &v->av, NULL);
	if (rc)
		goto out;
	rc = fi_endpoint(v->domain, info, &v->ep, NULL);
	if (rc)
		goto out;
	rc = fi_ep_bind(v->ep, &v->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!rc)
		rc = fi_ep_bind(v->ep, &v->av->fid, 0);
	if (!rc)
		rc = fi_enable(v->ep);
	if (rc)
		goto out;
	v->name_len = sizeof(v->name);
	rc = fi_getname(&v->ep->fid, v->name, &v->name_len);
	if (rc == -FI_ETOOSMALL) {
		LOG(v, PSL_VAN_LOG_ERROR,
		    "provider %s has %zu-byte endpoint names; the node list carries at most %d",
		    v->prov, v->name_len, FAB_ADDR_MAX);
		rc = -ENAMETOOLONG;
		goto out_quiet;
	}
	if (rc)
		goto out;
	v->ep_lock = info->domain_attr->threading != FI_THREAD_SAFE;
	v->need_mr = (info->domain_attr->mr_mode & FI_MR_LOCAL) || v->force_mr;
	if (v->need_mr)
		fab_pool_set_domain(v->pool, v->domain, v->ep,
				    (info->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0);
	if (info != v->info) {
		struct fi_info *d = fi_dupinfo(info);
		if (d) {
			fi_freeinfo(v->info);
			v->info = d;
		}
	}
	fi_freeinfo(found);
	return 0;
out:
	LOG(v, PSL_VAN_LOG_ERROR, "cannot open provider %s on %s: %s", v->prov,
	    info->domain_attr->name, fi_strerror(-rc));
	rc = rc == -FI_ENOMEM ? -ENOMEM : rc == -FI_ENODEV ? -ENODEV : -EIO;
out_quiet:
	fi_freeinfo(found);
	return rc;
}

static int fbind(struct psl_van *v, const struct psl_van_bind_req *req,
		 struct psl_van_bind_res *res)
{
	int rc, i;
	char ep_str[128];
	size_t sl = sizeof(ep_str);

	if (v->ep)
		return -EALREADY;
	rc = fab_tcp_listen(req->host, req->port, &v->listen.fd, &v->port);
	if (rc) {
		LOG(v, PSL_VAN_LOG_DEBUG, "listen on %s:%d: %s", req->host, req->port,
		    strerror(-rc));
		return rc;
	}
	rc = open_fabric(v, req->host);
	if (rc)
		goto out_listen;
	fab_mrc_init(&v->mrc, (size_t)param_long(v, "PS_FABRIC_MR_CACHE_SIZE", 1024, 1, 1 << 20),
		     param_long(v, "PS_FABRIC_MR_CACHE", 1, 0, 1) != 0, mr_reg, mr_dereg, v);
	v->mrc_ok = true;
	v->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	v->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (v->wake.fd < 0 || v->epfd < 0) {
		rc = -errno;
		goto out_listen;
	}
	ep_add(v, &v->wake, EPOLLIN);
	ep_add(v, &v->listen, EPOLLIN);
	if (v->cq_fd >= 0) {
		v->cqc.fd = v->cq_fd;
		ep_add(v, &v->cqc, EPOLLIN);
	}
	for (i = 0; i < v->rx_depth; i++) {
		rc = post_hdr(v);
		if (rc)
			goto out_listen;
	}
	rc = pthread_create(&v->thread, NULL, progress_main, v);
	if (rc) {
		rc = -rc;
		goto out_listen;
	}
	v->running = true;
	res->port = v->port;
	res->addr_len = (uint32_t)v->name_len;
	memcpy(res->addr, v->name, v->name_len);
	ep_str[0] = 0;
	fi_av_straddr(v->av, v->name, ep_str, &sl);
	LOG(v, PSL_VAN_LOG_DEBUG,
	    "bound %s:%d (bootstrap), endpoint %s on %s/%s, %s, %s%s", req->host, v->port, ep_str,
	    v->prov, v->info->domain_attr->name,
	    v->cq_fd >= 0 ? "waiting on the CQ fd" : "polling the CQ",
	    v->need_mr ? "registered buffers" : "no registration needed",
	    v->hmem ? ", CUDA memory" : "");
	return 0;
out_listen:
	/* the rest is closed by fini */
	close(v->listen.fd);
	v->listen.fd = -1;
	return rc;
}

/* ------------------------------------------------------------- connect -- */

static int fconnect(struct psl_van *v, const struct psl_van_peer *peer, int32_t my_id)
{
	struct fab_peer *p, *old;
	char num[64];

	if (!v->ep)
		return -ENOTCONN;
	if (peer->id < 0 || peer->id > 65535 || !peer->host || !*peer->host || peer->port <= 0 ||
	    peer->port > 65535)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->id = peer->id;
	p->my_id = my_id;
	fab_numeric_host(peer->host, num, sizeof(num));
	snprintf(p->host, sizeof(p->host), "%s", num);
	p->port = peer->port;
	snprintf(p->where, sizeof(p->where), "%s:%d", peer->host, peer->port);
	pthread_mutex_init(&p->mu, NULL);
	p->conn.fd = -1;
	p->state = P_CONNECTING;
	p->fa = FI_ADDR_NOTAVAIL;

	pthread_rwlock_wrlock(&v->lock);
	if (p->id >= v->npeers) {
		int n = p->id + 16;
		struct fab_peer **np = realloc(v->peers, sizeof(*np) * (size_t)n);
		if (!np) {
			pthread_rwlock_unlock(&v->lock);
			pthread_mutex_destroy(&p->mu);
			free(p);
			return -ENOMEM;
		}
		memset(np + v->npeers, 0, sizeof(*np) * (size_t)(n - v->npeers));
		v->peers = np;
		v->npeers = n;
	}
	old = v->peers[p->id];
	v->peers[p->id] = p;
	pthread_rwlock_unlock(&v->lock);
	if (old)
		atomic_store(&old->retiring, true);
	pthread_mutex_lock(&v->mu);
	p->next_new = v->newpeers;
	v->newpeers = p;
	pthread_mutex_unlock(&v->mu);
	wake(v);
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d: connecting to %s as node %d%s", p->id, p->where,
	    my_id, old ? " (replacing the earlier connection)" : "");
	return 0;
}

static int fdisconnect(struct psl_van *v, int32_t id)
{
	struct fab_peer *p = NULL;
	pthread_rwlock_wrlock(&v->lock);
	if (id >= 0 && id < v->npeers) {
		p = v->peers[id];
		v->peers[id] = NULL;
	}
	pthread_rwlock_unlock(&v->lock);
	if (!p)
		return -ENOENT;
	atomic_store(&p->retiring, true);
	wake(v);
	return 0;
}

/* ---------------------------------------------------------------- fini -- */

static bool all_sent(struct psl_van *v)
{
	struct fab_peer *p;
	bool done = true;
	int i;
	pthread_rwlock_rdlock(&v->lock);
	for (i = 0; i < v->npeers && done; i++) {
		p = v->peers[i];
		if (!p)
			continue;
		pthread_mutex_lock(&p->mu);
		if ((p->qhead && p->state != P_DOWN) || p->inflight)
			done = false;
		pthread_mutex_unlock(&p->mu);
	}
	pthread_rwlock_unlock(&v->lock);
	return done;
}

static void ffini(struct psl_van *v)
{
	struct fab_peer *p;
	int64_t t0 = now_ms();

	if (v->running) {
		/* let what was sent go out (like ZMQ_LINGER), then stop */
		while (!all_sent(v) && now_ms() - t0 < v->linger_ms)
			usleep(1000);
		atomic_store(&v->closing, true);
		atomic_store(&v->stop, true);
		wake(v);
		pthread_join(v->thread, NULL);
		v->running = false;
	}
	atomic_store(&v->closing, true);
	/* newly connected peers the thread did not pick up */
	while (v->newpeers) {
		p = v->newpeers;
		v->newpeers = p->next_new;
		p->next_all = v->all_peers;
		v->all_peers = p;
	}
	for (p = v->all_peers; p; p = p->next_all) {
		if (p->conn.fd >= 0 && p->state == P_UP) {
			struct fab_hello b;
			memset(&b, 0, sizeof(b));
			b.kind = FAB_BYE;
			b.seq = p->next_seq;
			send_hello(p->conn.fd, &b);
		}
		if (p->conn.fd >= 0)
			close(p->conn.fd);
		p->conn.fd = -1;
	}
	while (v->all_streams)
		stream_free(v, v->all_streams);
	/* the endpoint goes first: then nothing references any buffer */
	if (v->ep)
		fi_close(&v->ep->fid);
	v->ep = NULL;
	/* sends in flight complete with an error, before fini returns */
	for (;;) {
		struct fab_txop *op;
		pthread_mutex_lock(&v->mu);
		op = v->ops.lnext != &v->ops ? v->ops.lnext : NULL;
		if (op) {
			op->lprev->lnext = op->lnext;
			op->lnext->lprev = op->lprev;
		}
		pthread_mutex_unlock(&v->mu);
		if (!op)
			break;
		if (op->cookie)
			v->host->send_done(v->host->ctx, op->cookie, -ECANCELED);
		op_free(v, op);
	}
	while (v->orphans) {
		struct fab_rx *r = v->orphans;
		v->orphans = r->next_orphan;
		rx_free(r);
	}
	fab_pool_put_posted(v->pool);
	if (v->mrc_ok)
		fab_mrc_fini(&v->mrc);
	fab_pool_kill(v->pool);
	if (v->av)
		fi_close(&v->av->fid);
	if (v->cq)
		fi_close(&v->cq->fid);
	if (v->domain)
		fi_close(&v->domain->fid);
	if (v->fabric)
		fi_close(&v->fabric->fid);
	if (v->listen.fd >= 0)
		close(v->listen.fd);
	if (v->wake.fd >= 0)
		close(v->wake.fd);
	if (v->epfd >= 0)
		close(v->epfd);
	while (v->all_peers) {
		p = v->all_peers;
		v->all_peers = p->next_all;
		pthread_mutex_destroy(&p->mu);
		free(p);
	}
	free(v->peers);
	free(v->streams);
	fi_freeinfo(v->info);
	pthread_rwlock_destroy(&v->lock);
	pthread_mutex_destroy(&v->mu);
	pthread_mutex_destroy(&v->ep_mu);
	free(v);
}

static const struct psl_van_ops fabric_ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = VAN,
	.version = "pslite van_fabric " PACKAGE_VERSION " (built with libfabric " STR(
		FI_MAJOR_VERSION) "." STR(FI_MINOR_VERSION) ")",
	.description = "libfabric RDM endpoints, tagged messages (AWS EFA; tcp, sockets)",
	.init = finit,
	.fini = ffini,
	.query = fquery,
	.bind = fbind,
	.connect = fconnect,
	.disconnect = fdisconnect,
	.send = fsend,
	.reg_mem = freg_mem,
	.dereg_mem = fdereg_mem,
};

PSL_VAN_DEFINE_ENTRY(fabric_ops)
