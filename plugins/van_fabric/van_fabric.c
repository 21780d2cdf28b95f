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
 * provider completes them in. Over tcp;ofi_rxm every message goes eagerly,
 * without rxm's rendezvous reads (rxm_tcp_eager: libfabric 1.17 completes
 * such a read twice when its connection closes, and rxm crashes).
 *
 * Progress. One thread per van reads the completion queue and serves the TCP
 * sockets. It blocks in epoll on the CQ's wait fd (fi_trywait first), an
 * eventfd and the sockets; providers without a wait fd are polled with short
 * sleeps when idle. PS_BUSY_POLL=1 keeps polling (yielding the CPU between
 * polls) for PS_BUSY_POLL_US after each completion, then sleeps again, as
 * van_zmq and van_ucx do; PS_BUSY_POLL=auto opens the window only while
 * completions come back to back, sized by the gaps between them (van_util.h).
 * With the core's PS_CALLER_PROGRESS=1, a thread
 * that waits for a reply reads the CQ itself while the thread steps aside
 * (fab_progress.c). Senders post from their own thread; what the provider cannot take now (-FI_EAGAIN), or what is sent
 * before the peer is reached, waits in the peer's queue, in order.
 */

#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
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

#define STR2(x) #x
#define STR(x) STR2(x)

/* An integer setting (van_util.h): a bad value is logged as the standard
 * line and counted, and init fails with -EINVAL once the provider has been
 * looked up. */
static long param_long(struct psl_van *v, const char *name, long def, long min, long max,
		       const char *unit)
{
	long x;
	if (psl_van_param_long(v->host, "van_fabric", name, def, min, max, unit, &x)) {
		v->bad_params++;
		return def;
	}
	return x;
}

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

/* How many CUDA devices the driver sees (0 without a driver), asked
 * through libcuda if it is there: the van does not link CUDA. */
static int cuda_devices(void)
{
	typedef int (*init_fn)(unsigned int);
	typedef int (*count_fn)(int *);
	void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	init_fn cu_init;
	count_fn cu_count;
	int n = 0;
	if (!dl)
		return 0;
	cu_init = (init_fn)dlsym(dl, "cuInit");
	cu_count = (count_fn)dlsym(dl, "cuDeviceGetCount");
	if (!cu_init || !cu_count || cu_init(0) != 0 || cu_count(&n) != 0)
		n = 0;
	dlclose(dl);
	return n;
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
	/* CUDA memory, where there is a GPU and the provider can (EFA with
	 * GPUDirect RDMA) */
	if (!rc && v->want_hmem && cuda_devices() > 0) {
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
	size_t pool_mb;
	int rc, mode;
	if (!v)
		return -ENOMEM;
	v->host = host;
	v->secret = psl_van_secret(host);
	v->cq_fd = -1;
	v->epfd = -1;
	v->listen.fd = v->wake.fd = -1;
	v->listen.type = CONN_LISTEN;
	v->wake.type = CONN_WAKE;
	v->cqc.type = CONN_CQ;
	v->next_stream = 1;
	snprintf(v->prov_filter, sizeof(v->prov_filter), "%s", fab_param(v, "FI_PROVIDER", ""));
	if (psl_van_busy_poll_settings(host, "van_fabric", &mode, &v->spin_ns))
		v->bad_params++;
	v->busy_poll = mode != 0;
	v->poll_auto = mode == 2;
	v->force_mr = param_long(v, "PS_FABRIC_MR", 0, 0, 1, NULL) != 0;
	v->want_hmem = param_long(v, "PS_FABRIC_HMEM", 1, 0, 1, NULL) != 0;
	v->hdr_buf = (size_t)param_long(v, "PS_FABRIC_INLINE", 8192, 1024, 1 << 20,
					"a number of bytes");
	v->rx_depth = (int)param_long(v, "PS_FABRIC_RX_DEPTH", 64, 4, 65536,
				      "a number of receive buffers");
	v->linger_ms = (int)param_long(v, "PS_FABRIC_LINGER_MS", 2000, 0, 600000, "milliseconds");
	v->connect_ms = 1000 * ((int)param_long(v, "PS_CONNECT_TIMEOUT", 60, 1, 86400, "seconds") + 5);
	v->mr_cache = param_long(v, "PS_FABRIC_MR_CACHE", -1, 0, 1, NULL);
	v->mr_cache_size = (size_t)param_long(v, "PS_FABRIC_MR_CACHE_SIZE", 1024, 1, 1 << 20,
					      "a number of registrations");
	pool_mb = (size_t)param_long(v, "PS_FABRIC_POOL_MB", 256, 0, 1 << 20, "MiB");
	pthread_mutex_init(&v->ep_mu, NULL);
	pthread_mutex_init(&v->cq_mu, NULL);
	pthread_mutex_init(&v->mu, NULL);
	pthread_rwlock_init(&v->lock, NULL);
	/* (the provider is looked up even after a bad setting: what libfabric's
	 * libraries allocate as they load is freed at unload only once
	 * fi_getinfo has initialised libfabric; LeakSanitizer saw it otherwise) */
	rc = choose_provider(v);
	if (!rc && v->bad_params)
		rc = -EINVAL;
	if (!rc)
		rc = fab_pool_new(host, pool_mb << 20, &v->pool);
	if (rc) {
		fi_freeinfo(v->info);
		pthread_rwlock_destroy(&v->lock);
		pthread_mutex_destroy(&v->mu);
		pthread_mutex_destroy(&v->ep_mu);
		pthread_mutex_destroy(&v->cq_mu);
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
	if (!(v->info->domain_attr->mr_mode & FI_MR_PROV_KEY))
		a.requested_key = fab_next_key();
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
		    "cannot register CUDA memory: no CUDA device was found, or provider %s has "
		    "no FI_HMEM support here (EFA with GPUDirect RDMA has it)",
		    v->prov);
		return -EINVAL;
	}
	rc = fab_mrc_get(&v->mrc, addr, len, mem_type, dev_id, true, &e);
	if (!rc)
		*mr = e;
	return rc;
}

static int fdereg_mem(struct psl_van *v, void *mr)
{
	struct fab_mrc_ent *e = mr;
	uintptr_t s;
	size_t n;
	if (!e)
		return -EINVAL;
	s = e->start;
	n = e->end - e->start;
	fab_mrc_put(&v->mrc, e);
	/* the caller may free the memory now: no cached entry may outlive it */
	fab_mrc_invalidate(&v->mrc, (void *)s, n);
	return 0;
}

/* ---------------------------------------------------------------- bind -- */

/* The tcp provider of libfabric 1.17 (Debian 12's) completes an RMA read
 * twice when its endpoint is flushed (closed, or shut down) while the read's
 * response is arriving: the entry stays on rma_read_queue while it is the
 * current receive, is completed and freed from the queue, then completed
 * again, zeroed, as the current receive (fixed in libfabric 1.18, commit
 * a74ea0fcd "prov/tcp: Suspicion of bug where RX entry is freed twice").
 * ofi_rxm takes that second completion's NULL context for one of its
 * buffers: SIGSEGV in fi_close(ep) at fini when a peer froze while it sent
 * a large part. ofi_rxm reads only in its rendezvous, for messages above its
 * eager limit; over tcp (dynamic receive buffers and direct send, both on
 * unless turned off) an eager message goes from the sender's memory into
 * the posted receive too (one that comes before its receive is copied once:
 * docs/van-fabric.md has what it costs). So the van raises the limit to the
 * most that rxm's connection request carries (32 bits). rxm refuses a
 * connection between endpoints whose limits differ, so it is raised whatever
 * the version, the same on every node; a value in the environment stays. */
static void rxm_tcp_eager(struct psl_van *v)
{
	if (strcmp(v->prov, "tcp;ofi_rxm") != 0)
		return;
	if (getenv("FI_OFI_RXM_EAGER_LIMIT")) {
		LOG(v, PSL_VAN_LOG_DEBUG, "FI_OFI_RXM_EAGER_LIMIT=%s (set outside)",
		    getenv("FI_OFI_RXM_EAGER_LIMIT"));
		return;
	}
	setenv("FI_OFI_RXM_EAGER_LIMIT", "4294967295", 0);
	LOG(v, PSL_VAN_LOG_DEBUG,
	    "FI_OFI_RXM_EAGER_LIMIT=4294967295: no rendezvous reads (libfabric 1.17's tcp "
	    "provider can complete one twice when a connection closes)");
}

static int open_fabric(struct psl_van *v, const char *host)
{
	struct fi_info *info = v->info, *found = NULL;
	struct fi_cq_attr cqa;
	struct fi_av_attr ava;
	char num[64];
	int rc;

	rxm_tcp_eager(v); /* read when the endpoint opens */

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
	cqa.wait_obj = FI_WAIT_FD; /* PS_BUSY_POLL polls, then sleeps again */
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
		fab_pool_set_domain(v->pool, v->domain, v->ep, info->domain_attr->mr_mode);
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
	long cache;
	char ep_str[128];
	size_t sl = sizeof(ep_str);

	if (v->ep)
		return -EALREADY;
	if (req->role == 2) /* the scheduler carries no data: it never polls */
		v->busy_poll = false;
	rc = fab_tcp_listen(req->host, req->port, &v->listen.fd, &v->port);
	if (rc) {
		LOG(v, PSL_VAN_LOG_DEBUG, "listen on %s:%d: %s", req->host, req->port,
		    strerror(-rc));
		return rc;
	}
	rc = open_fabric(v, req->host);
	if (rc)
		goto out_listen;
	cache = v->mr_cache;
	fab_mrc_init(&v->mrc, v->mr_cache_size, cache != 0, mr_reg, mr_dereg, v);
	/* A cached registration of memory that is freed and mapped again would
	 * describe the old pages. reg_mem's are dropped at dereg_mem; those made
	 * for a send are cached unless the provider keeps a cache of its own
	 * that watches unmaps (then registering again is cheap and safe). */
	v->cache_sends = cache == 1 ||
			 (cache == -1 && !fab_prov_match("efa,verbs,psm3,cxi,opx", v->prov));
	v->mrc_ok = true;
	v->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	v->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (v->wake.fd < 0 || v->epfd < 0) {
		rc = -errno;
		goto out_listen;
	}
	fab_ep_add(v, &v->wake, EPOLLIN);
	fab_ep_add(v, &v->listen, EPOLLIN);
	if (v->cq_fd >= 0) {
		v->cqc.fd = v->cq_fd;
		fab_ep_add(v, &v->cqc, EPOLLIN);
	}
	for (i = 0; i < v->rx_depth; i++) {
		rc = fab_post_hdr(v);
		if (rc)
			goto out_listen;
	}
	rc = pthread_create(&v->thread, NULL, fab_progress_main, v);
	if (rc) {
		rc = -rc;
		goto out_listen;
	}
	v->running = true;
	atomic_store(&v->bound, true);
	res->port = v->port;
	res->addr_len = (uint32_t)v->name_len;
	memcpy(res->addr, v->name, v->name_len);
	ep_str[0] = 0;
	fi_av_straddr(v->av, v->name, ep_str, &sl);
	LOG(v, PSL_VAN_LOG_DEBUG,
	    "bound %s:%d (bootstrap), endpoint %s on %s/%s, %s, %s%s%s", req->host, v->port,
	    ep_str, v->prov, v->info->domain_attr->name,
	    v->cq_fd >= 0 ? "waiting on the CQ fd" : "polling the CQ",
	    v->need_mr ? "registered buffers" : "no registration needed",
	    v->need_mr ? (v->cache_sends ? " (cached)" : " (the provider caches them)") : "",
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
	fab_wake(v);
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
	/* the core disconnects a node it lost: a frozen one never takes what
	 * is queued or posted to it, and the requests wait for their sends */
	pthread_mutex_lock(&p->mu);
	p->drop_at_ms = psl_van_now_ms() + FAB_DROP_GRACE_MS;
	pthread_mutex_unlock(&p->mu);
	atomic_store(&p->retiring, true);
	fab_wake(v);
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
	int64_t t0 = psl_van_now_ms();

	if (v->running) {
		/* let what was sent go out (like ZMQ_LINGER), then stop */
		while (!all_sent(v) && psl_van_now_ms() - t0 < v->linger_ms)
			usleep(1000);
		atomic_store(&v->closing, true);
		atomic_store(&v->stop, true);
		fab_wake(v);
		pthread_join(v->thread, NULL);
		v->running = false;
	}
	atomic_store(&v->closing, true);
	atomic_store(&v->stop, true);
	/* a caller that drives sees stop once it has cq_mu: wait for one inside */
	pthread_mutex_lock(&v->cq_mu);
	pthread_mutex_unlock(&v->cq_mu);
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
			fab_send_hello(p->conn.fd, &b);
		}
		if (p->conn.fd >= 0)
			close(p->conn.fd);
		p->conn.fd = -1;
	}
	while (v->all_streams)
		fab_stream_free(v, v->all_streams);
	/* the endpoint goes first: then nothing references any buffer */
	if (v->ep)
		fi_close(&v->ep->fid);
	v->ep = NULL;
	/* sends in flight complete with an error, before fini returns */
	for (p = v->all_peers; p; p = p->next_all) {
		while (p->live) {
			struct fab_txop *op = p->live;
			fab_op_unlink(p, op);
			if (op->cookie)
				v->host->send_done(v->host->ctx, op->cookie, -ECANCELED);
			fab_op_free(v, op);
		}
	}
	while (v->orphans) {
		struct fab_rx *r = v->orphans;
		v->orphans = r->next_orphan;
		fab_rx_free(r);
	}
	fab_pool_put_posted(v->pool);
	if (v->mrc_ok) {
		if (v->mrc.hits || v->mrc.misses)
			LOG(v, PSL_VAN_LOG_DEBUG,
			    "registration cache: %llu hits, %llu misses, %llu evictions",
			    (unsigned long long)v->mrc.hits, (unsigned long long)v->mrc.misses,
			    (unsigned long long)v->mrc.evictions);
		fab_mrc_fini(&v->mrc);
	}
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
	pthread_mutex_destroy(&v->cq_mu);
	free(v);
}

static const struct psl_van_ops fabric_ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = VAN,
	.version = "pslite van_fabric " PSL_VAN_VERSION " (built with libfabric " STR(
		FI_MAJOR_VERSION) "." STR(FI_MINOR_VERSION) ")",
	.description = "libfabric RDM endpoints, tagged messages (AWS EFA; tcp, sockets)",
	.init = finit,
	.fini = ffini,
	.query = fquery,
	.bind = fbind,
	.connect = fconnect,
	.disconnect = fdisconnect,
	.send = fab_send,
	.reg_mem = freg_mem,
	.dereg_mem = fdereg_mem,
	.progress = fab_drive,
};

PSL_VAN_DEFINE_ENTRY(fabric_ops)
