/*
 * van_ucx: UCX (UCP active messages) for pslite. Shared memory, TCP, RDMA
 * and CUDA memory, as far as the UCX library found at run time offers them.
 *
 * Files:
 *   van_ucx.c    lifecycle (init, query, bind, connect, fini) and the
 *                progress thread
 *   ucx_boot.c   the TCP bootstrap on the bound port: listening, greeting,
 *                inbound connections (why TCP: see there)
 *   ucx_connect.c  outbound connections: handshake, worker address, UCP
 *                endpoint, liveness of the peer, retries, replacement
 *   ucx_send.c   a message as active messages, zero-copy for large data
 *   ucx_recv.c   reassembly, in-order delivery, zero-copy hand-over
 *   ucx_proto.c  wire formats and decisions that need no UCX run time
 *
 * Settings (the host's parameters, i.e. the environment):
 *   PS_BUSY_POLL=1              after each message, keep polling UCX (and
 *                               yielding the CPU between polls) for
 *   PS_BUSY_POLL_US=US          microseconds (200) before sleeping again
 *   PS_BUSY_POLL=auto           a window only while messages come back to
 *                               back, sized by the gaps between them, up
 *                               to PS_BUSY_POLL_US (50) (van_util.h)
 *   PS_UCX_INLINE=BYTES         host segments up to this size are copied into
 *                               the message's first active message (8192)
 *   PS_UCX_BATCH_KB=KB          messages the progress thread sends while it
 *                               delivers (answers, follow-up requests) go to
 *                               each peer in batches of up to this much (32,
 *                               0 = one active message each)
 *   PS_UCX_HANDSHAKE_TIMEOUT=S  bootstrap handshake limit in seconds (10)
 *   PS_UCX_LINGER_MS=MS         how long fini lets sends in flight finish (1000)
 *   PS_UCX_RX_CACHE_MB=MB       receive buffers kept for reuse (256, 0 = none)
 *   PS_UCX_PULL_IN_PLACE=0|1    large pull answers go straight into the
 *                               worker's buffer (1) or through ours (0)
 *   PS_UCX_ERR_MODE=none|peer   UCP endpoint error handling (none: the
 *                               bootstrap connection tells that a peer died,
 *                               and every transport stays usable; peer: UCX
 *                               also watches, but only over transports that
 *                               detect peer failure, which excludes shared
 *                               memory in UCX 1.13)
 *   PS_CONNECT_TIMEOUT=S        how long to retry reaching a peer (60)
 *   PS_UCX_IDLE_WAKE_US=US      longest sleep of the progress thread when
 *                               idle (-1 = until an event; the default is
 *                               1000 on a machine with an RDMA device in
 *                               /sys/class/infiniband, -1 elsewhere: see
 *                               progress_main)
 * and UCX's own UCX_* variables (UCX_TLS, UCX_NET_DEVICES, ...).
 */

#define _GNU_SOURCE 1
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "ucx_van.h"

#define UCX_DEFAULT_FIFO "256"
#define STR2(x) #x
#define STR(x) STR2(x)

void psl__ucx_wake(struct psl_van *v)
{
	uint64_t one = 1;
	ssize_t rc;
	if (v->wake_fd < 0)
		return;
	rc = write(v->wake_fd, &one, sizeof(one));
	(void)rc;
}

/*
 * Work was put in the inbox (and inbox_full set): wake the thread if it
 * sleeps. The thread sets sleeping before it looks at inbox_full a last
 * time, we set inbox_full before we look at sleeping (both seq_cst): one of
 * us sees the other, so no work is left waiting for the next event.
 */
void psl__ucx_kick(struct psl_van *v)
{
	if (!atomic_load(&v->sleeping))
		return;
	if (!atomic_exchange(&v->kicked, true))
		psl__ucx_wake(v);
}

int psl__ucx_errno(ucs_status_t st)
{
	switch (st) {
	case UCS_OK:
		return 0;
	case UCS_ERR_NO_MEMORY:
		return ENOMEM;
	case UCS_ERR_INVALID_PARAM:
		return EINVAL;
	case UCS_ERR_UNREACHABLE:
		return EHOSTUNREACH;
	case UCS_ERR_NO_DEVICE:
	case UCS_ERR_NO_ELEM:
		return ENODEV;
	case UCS_ERR_BUSY:
		return EBUSY;
	case UCS_ERR_CANCELED:
		return ECANCELED;
	case UCS_ERR_TIMED_OUT:
	case UCS_ERR_ENDPOINT_TIMEOUT:
		return ETIMEDOUT;
	case UCS_ERR_CONNECTION_RESET:
		return ECONNRESET;
	case UCS_ERR_NOT_CONNECTED:
		return ENOTCONN;
	case UCS_ERR_REJECTED:
		return ECONNREFUSED;
	case UCS_ERR_UNSUPPORTED:
		return ENOTSUP;
	case UCS_ERR_MESSAGE_TRUNCATED:
		return EMSGSIZE;
	case UCS_ERR_NO_RESOURCE:
		return EAGAIN;
	default:
		return EIO;
	}
}

/* ----------------------------------------------------------- settings -- */

static const char *param(struct psl_van *v, const char *name)
{
	return psl_van_param(v->host, name);
}

static int param_long(struct psl_van *v, const char *name, long def, long lo, long hi,
		      const char *unit, long *out)
{
	return psl_van_param_long(v->host, UCX_LOGNAME, name, def, lo, hi, unit, out);
}

/* Whether the kernel lists an RDMA device (InfiniBand, RoCE, soft-RoCE). */
static bool has_rdma_device(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d)))
		found = e->d_name[0] != '.';
	closedir(d);
	return found;
}

static int read_settings(struct psl_van *v)
{
	long x;
	int mode;
	const char *s;
	int rc;

	if ((rc = psl_van_busy_poll_settings(v->host, UCX_LOGNAME, &mode, &v->spin_ns)))
		return rc;
	v->busy_poll = mode != 0;
	v->poll_auto = mode == 2;
	if ((rc = param_long(v, "PS_UCX_INLINE", 8192, 0, 1 << 20, "a number of bytes", &x)))
		return rc;
	v->inline_max = (size_t)x;
	if ((rc = param_long(v, "PS_UCX_BATCH_KB", 32, 0, 1024, "KiB", &x)))
		return rc;
	v->batch_max = (size_t)x << 10;
	if ((rc = param_long(v, "PS_UCX_HANDSHAKE_TIMEOUT", 10, 1, 3600, "seconds", &x)))
		return rc;
	v->handshake_ms = (int)x * 1000;
	if ((rc = param_long(v, "PS_UCX_LINGER_MS", 1000, 0, 600000, "milliseconds", &x)))
		return rc;
	v->linger_ms = (int)x;
	if ((rc = param_long(v, "PS_UCX_IDLE_WAKE_US", has_rdma_device() ? 1000 : -1, -1,
			     1000000, "microseconds", &x)))
		return rc;
	v->idle_wake_us = x;
	if ((rc = param_long(v, "PS_CONNECT_TIMEOUT", 60, 1, 86400, "seconds", &x)))
		return rc;
	v->connect_ms = (int)x * 1000;
	if ((rc = param_long(v, "PS_UCX_RX_CACHE_MB", 256, 0, 1 << 20, "MiB", &x)))
		return rc;
	v->pool.max_bytes = (size_t)x << 20;
	if ((rc = param_long(v, "PS_UCX_PULL_IN_PLACE", 1, 0, 1, NULL, &x)))
		return rc;
	/* (a core older than ABI 1.1 lends nothing) */
	v->lend = x != 0 && v->host->size >= PSL_VAN_HOST_SIZE_1_1 && v->host->recv_dest &&
		  v->host->recv_dest_put;
	s = param(v, "PS_UCX_ERR_MODE");
	if (!s || !strcmp(s, "none"))
		v->peer_errors = false;
	else if (!strcmp(s, "peer"))
		v->peer_errors = true;
	else {
		LOG(v, PSL_VAN_LOG_ERROR, "PS_UCX_ERR_MODE=%s: expected none or peer", s);
		return -EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------- lifecycle -- */

static void van_destroy(struct psl_van *v)
{
	if (v->worker)
		psl__ucx_rx_free_orphans(v, true);
	if (v->addr)
		ucp_worker_release_address(v->worker, v->addr);
	if (v->worker)
		ucp_worker_destroy(v->worker);
	psl__ucx_rx_free_orphans(v, false); /* UCX no longer writes into them */
	/* what UCX never completed, and the connections they were posted on */
	psl__ucx_free_unfinished(v);
	while (v->outs) {
		struct ucx_out *o = v->outs;
		v->outs = o->next;
		psl__ucx_out_free(o);
	}
	if (v->ctx && !v->keep_ctx)
		ucp_cleanup(v->ctx);
	psl__ucx_pool_fini(&v->pool);
	pthread_rwlock_destroy(&v->lock);
	pthread_mutex_destroy(&v->mu);
	pthread_mutex_destroy(&v->cq_mu);
	pthread_mutex_destroy(&v->sends_mu);
	pthread_mutex_destroy(&v->inbox_mu);
	pthread_mutex_destroy(&v->ucx_mu);
	free(v);
}

void psl__ucx_unref(struct psl_van *v)
{
	if (atomic_fetch_sub(&v->refs, 1) == 1)
		van_destroy(v);
}

/* "tcp/lo tcp/eth0 posix/memory ..." from UCX's own account. */
static void find_resources(struct psl_van *v)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (f) {
		ucp_context_print_info(v->ctx, f);
		fclose(f);
	}
	v->tl_found = text ? psl__ucxp_resources(text, v->transports, sizeof(v->transports)) : 0;
	if (!v->transports[0])
		snprintf(v->transports, sizeof(v->transports), "(UCX did not list them)");
	free(text);
}

/* An RDMA device (any entry in /sys/class/infiniband) or an NVIDIA GPU. */
static bool rdma_or_gpu_here(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	bool found = access("/dev/nvidiactl", F_OK) == 0;
	if (d) {
		struct dirent *e;
		while (!found && (e = readdir(d)))
			found = e->d_name[0] != '.';
		closedir(d);
	}
	return found;
}

static int uinit(const struct psl_van_host *host, struct psl_van **out)
{
	struct psl_van *v = calloc(1, sizeof(*v));
	ucp_params_t cp;
	ucp_worker_params_t wp;
	ucp_context_attr_t ca;
	ucp_am_handler_param_t ap;
	ucp_config_t *cfg = NULL;
	pthread_mutexattr_t ma;
	unsigned maj, min, rel;
	const char *tls;
	ucs_status_t st;
	int rc;

	if (!v)
		return -ENOMEM;
	v->host = host;
	v->epfd = v->wake_fd = v->lfd = v->efd = -1;
	v->next_timer = -1;
	v->h_wake.kind = FD_WAKE;
	v->h_worker.kind = FD_WORKER;
	v->h_listen.kind = FD_LISTEN;
	atomic_init(&v->refs, 1);
	pthread_rwlock_init(&v->lock, NULL);
	pthread_mutex_init(&v->mu, NULL);
	pthread_mutex_init(&v->cq_mu, NULL);
	pthread_mutex_init(&v->sends_mu, NULL);
	pthread_mutex_init(&v->inbox_mu, NULL);
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&v->ucx_mu, &ma);
	pthread_mutexattr_destroy(&ma);
	/* the (conn, nonce) pairs every active message carries must not be
	 * guessable by a stranger: from the kernel's randomness */
	if (getrandom(&v->nonce_seed, sizeof(v->nonce_seed), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(v->nonce_seed))
		v->nonce_seed = (uint32_t)getpid() * 2654435761u ^ (uint32_t)psl_van_now_ms();
	v->secret = psl_van_secret(host);
	psl__ucx_pool_init(&v->pool, 0);
	rc = read_settings(v);
	if (rc)
		goto out_free;

	ucp_get_version(&maj, &min, &rel);
	v->ucx_version = UCP_VERSION(maj, min);
	snprintf(v->ucx_version_str, sizeof(v->ucx_version_str), "%u.%u.%u", maj, min, rel);
	tls = param(v, "UCX_TLS");

	st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK) {
		LOG(v, PSL_VAN_LOG_ERROR,
		    "UCX cannot read its configuration (the UCX_* variables): %s",
		    ucs_status_string(st));
		rc = -EINVAL;
		goto out_free;
	}
	/*
	 * UCX's shared-memory receive FIFO holds 64 messages by default. A
	 * worker's round of push-pull requests (80 in ps-lite's benchmark) then
	 * overflows it, the rest waits in UCX for the receiver to make room, and
	 * nothing tells the sender when it did: a round of 80 x 4 KiB took
	 * 9-16 ms instead of 0.2-0.5 ms here. 256 entries cost ~2 MiB of shared
	 * memory per transport; UCX_MM_FIFO_SIZE still decides.
	 */
	if (!param(v, "UCX_MM_FIFO_SIZE") && psl__ucxp_tls_has_mm(tls) &&
	    ucp_config_modify(cfg, "MM_FIFO_SIZE", UCX_DEFAULT_FIFO) != UCS_OK)
		LOG(v, PSL_VAN_LOG_DEBUG, "UCX does not take MM_FIFO_SIZE=%s", UCX_DEFAULT_FIFO);
	/* the sender's thread copies (psl__ucxp_rndv_put); UCX_RNDV_SCHEME
	 * still decides */
	v->rndv_put = !param(v, "UCX_RNDV_SCHEME") && psl__ucxp_rndv_put(tls, rdma_or_gpu_here());
	if (v->rndv_put && ucp_config_modify(cfg, "RNDV_SCHEME", "put_zcopy") != UCS_OK) {
		LOG(v, PSL_VAN_LOG_DEBUG, "UCX does not take RNDV_SCHEME=put_zcopy");
		v->rndv_put = false;
	}
	memset(&cp, 0, sizeof(cp));
	cp.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
	cp.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
	cp.mt_workers_shared = 0;
	st = ucp_init(&cp, cfg, &v->ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) {
		v->ctx = NULL;
		if (st == UCS_ERR_NO_DEVICE || st == UCS_ERR_NO_ELEM || st == UCS_ERR_UNSUPPORTED) {
			LOG(v, PSL_VAN_LOG_INFO,
			    "UCX %s finds no transport it can use here%s%s%s: %s",
			    v->ucx_version_str, tls ? " (UCX_TLS=" : "", tls ? tls : "",
			    tls ? "; ucx_info -d lists what there is)" : "", ucs_status_string(st));
			rc = -ENODEV;
		} else {
			LOG(v, PSL_VAN_LOG_ERROR, "UCX %s does not start: %s", v->ucx_version_str,
			    ucs_status_string(st));
			rc = -psl__ucx_errno(st);
		}
		goto out_free;
	}
	memset(&ca, 0, sizeof(ca));
	ca.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
	if (ucp_context_query(v->ctx, &ca) == UCS_OK)
		v->mem_caps = psl__ucxp_mem_caps(ca.memory_types,
						 UCS_BIT(UCS_MEMORY_TYPE_CUDA) |
							 UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED));
	else
		v->mem_caps = UCXP_MEM_HOST;

	memset(&wp, 0, sizeof(wp));
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_AM_ALIGNMENT;
	wp.thread_mode = UCS_THREAD_MODE_SERIALIZED; /* one owner at a time: see ucx_van.h */
	wp.am_alignment = 8;
	st = ucp_worker_create(v->ctx, &wp, &v->worker);
	if (st != UCS_OK) {
		v->worker = NULL;
		LOG(v, st == UCS_ERR_NO_DEVICE ? PSL_VAN_LOG_INFO : PSL_VAN_LOG_ERROR,
		    "UCX %s cannot create a worker%s%s%s: %s", v->ucx_version_str,
		    tls ? " (UCX_TLS=" : "", tls ? tls : "", tls ? ")" : "",
		    ucs_status_string(st));
		rc = st == UCS_ERR_NO_DEVICE ? -ENODEV : -psl__ucx_errno(st);
		goto out_free;
	}
	{
		ucp_worker_attr_t wa = {.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER};
		/* a head that fits in a data part's header goes with it */
		v->joined_max = 0;
		if (ucp_worker_query(v->worker, &wa) == UCS_OK &&
		    wa.max_am_header > UCXP_AM_HDR_SIZE)
			v->joined_max = wa.max_am_header - UCXP_AM_HDR_SIZE;
		if (v->joined_max > UCX_JOINED_MAX)
			v->joined_max = UCX_JOINED_MAX;
	}
	st = ucp_worker_get_address(v->worker, &v->addr, &v->addr_len);
	if (st != UCS_OK) {
		v->addr = NULL;
		rc = -psl__ucx_errno(st);
		goto out_free;
	}
	memset(&ap, 0, sizeof(ap));
	ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
			UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
	ap.id = UCX_AM_ID;
	ap.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
	ap.cb = psl__ucx_am_cb;
	ap.arg = v;
	st = ucp_worker_set_am_recv_handler(v->worker, &ap);
	if (st == UCS_OK) {
		ap.id = UCX_AM_BATCH_ID;
		ap.flags = UCP_AM_FLAG_WHOLE_MSG;
		ap.cb = psl__ucx_am_batch_cb;
		st = ucp_worker_set_am_recv_handler(v->worker, &ap);
	}
	if (st == UCS_OK) {
		ap.id = UCX_AM_JOINED_ID;
		ap.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
		ap.cb = psl__ucx_am_joined_cb;
		st = ucp_worker_set_am_recv_handler(v->worker, &ap);
	}
	if (st != UCS_OK) {
		rc = -psl__ucx_errno(st);
		goto out_free;
	}
	find_resources(v);
	*out = v;
	return 0;

out_free:
	van_destroy(v);
	return rc;
}

static int uquery(struct psl_van *v, struct psl_van_caps *caps)
{
	char mem[32];
	snprintf(mem, sizeof(mem), "host%s", (v->mem_caps & UCXP_MEM_CUDA) ? ", cuda" : "");
	caps->flags = PSL_VAN_CAP_ZC_SEND | PSL_VAN_CAP_ZC_RECV | PSL_VAN_CAP_MEM_HOST |
		      ((v->mem_caps & UCXP_MEM_CUDA) ? PSL_VAN_CAP_MEM_CUDA : 0);
	caps->max_msg_size = 0;
	snprintf(caps->transports, sizeof(caps->transports), "UCX %s: %.120s; memory: %s%s%s%s",
		 v->ucx_version_str, v->transports, mem,
		 (v->tl_found & UCXP_TL_RDMA) ? "" : "; no RDMA device",
		 (v->mem_caps & UCXP_MEM_CUDA) ? "" : "; no CUDA in this UCX",
		 v->busy_poll ? "; busy polling" : "");
	return 0;
}

/* ------------------------------------------------------ progress thread -- */

/* Drives UCX until it has nothing to do, then hands what happened to the
 * host. Returns true if more work may be waiting. */
static bool progress_round(struct psl_van *v)
{
	unsigned n = 0, k;

	n += (unsigned)psl__ucx_post_inbox(v);
	n += (unsigned)psl__ucx_release_inbox(v);
	for (k = 0; k < 256; k++) {
		unsigned got = ucp_worker_progress(v->worker);
		n += got;
		if (!got)
			break;
	}
	if (atomic_exchange(&v->ep_errors, 0)) {
		struct ucx_out *o, **snap = NULL;
		size_t cnt = 0, i = 0;
		pthread_mutex_lock(&v->mu);
		for (o = v->outs; o; o = o->next)
			cnt++;
		snap = cnt ? malloc(cnt * sizeof(*snap)) : NULL;
		for (o = v->outs; o && snap; o = o->next)
			snap[i++] = o;
		pthread_mutex_unlock(&v->mu);
		for (cnt = i, i = 0; i < cnt; i++) {
			if (!atomic_exchange(&snap[i]->ep_error, false))
				continue;
			psl__ucx_out_fail(snap[i], PSL_VAN_PEER_DOWN, -ECONNRESET,
					  "UCX reports the endpoint failed (the peer went away)");
		}
		free(snap);
		n++;
	}
	/* what the core sends from these callbacks goes out after them, in
	 * batches (a round of answers to one peer: one send) */
	v->deferring = v->batch_max > 0;
	n += (unsigned)psl__ucx_dispatch_done(v);
	n += (unsigned)psl__ucx_dispatch_ready(v);
	v->deferring = false;
	n += (unsigned)psl__ucx_post_deferred(v);
	return n > 0;
}

bool psl__ucx_progress_once(struct psl_van *v)
{
	bool busy;
	v->in_round = true; /* a host callback that drives is told -EDEADLK */
	busy = progress_round(v);
	v->in_round = false;
	return busy;
}

/* epoll_wait with a timeout in microseconds (-1: none). */
static int wait_events(struct psl_van *v, struct epoll_event *ev, int max, long us)
{
#ifdef HAVE_EPOLL_PWAIT2
	static atomic_bool no_pwait2;
	if (us > 0 && us % 1000 && !atomic_load(&no_pwait2)) {
		struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
		int n = epoll_pwait2(v->epfd, ev, max, &ts, NULL);
		if (n >= 0 || errno != ENOSYS)
			return n;
		atomic_store(&no_pwait2, true); /* kernel older than 5.11 */
	}
#endif
	return epoll_wait(v->epfd, ev, max, us < 0 ? -1 : (int)((us + 999) / 1000));
}

/*
 * The thread sleeps in epoll_wait until the UCX worker's event fd, the
 * wake-up eventfd or a bootstrap socket has news, or the next bootstrap
 * deadline. While send requests are outstanding it sleeps only briefly, 20
 * us at first, twice as long each time nothing moved, up to 1 ms: UCX's arm
 * covers arrivals, but not every transport signals that room came free for
 * a send it had to queue (the shared memory FIFO does not), and two nodes
 * could otherwise both sleep with sends queued for each other. Sleeping
 * rather than spinning leaves the CPU to the peer that makes the room.
 *
 * Idle, it sleeps at most PS_UCX_IDLE_WAKE_US: over UCX's verbs transports
 * (rc_verbs, ud_verbs in UCX 1.13 on soft-RoCE) an armed worker's event fd
 * was not always signalled for an arrival, and a job hung with messages
 * waiting until a 1 ms bound was set (tests/vm/ucx_verbs.sh: every run hung
 * without it, none with it). The bound is the default where an RDMA device
 * exists; elsewhere the thread sleeps until an event.
 */
#define PENDING_WAIT_MIN_US 20
#define PENDING_WAIT_MAX_US 1000
#define BUSY_SOCKET_ROUNDS 16

/* Between two polls of PS_BUSY_POLL's window: let go of the worker (senders
 * post themselves meanwhile) and of the CPU (on a small machine the peer
 * needs it to answer). False when the CPU came back late: sleep instead. */
static bool spin_yield(struct psl_van *v, struct psl_van_spin *spin)
{
	bool ok;
	pthread_mutex_unlock(&v->ucx_mu);
	ok = psl_van_spin_yield(spin);
	pthread_mutex_lock(&v->ucx_mu);
	return ok;
}

static void *progress_main(void *arg)
{
	struct psl_van *v = arg;
	struct epoll_event ev[32];
	unsigned rounds = 0, busy_rounds = 0;
	long pending_wait = PENDING_WAIT_MIN_US;
	struct psl_van_spin spin;
	struct psl_van_spin_auto pa;

	psl_van_spin_auto_init(&spin, &pa, v->busy_poll ? (v->poll_auto ? 2 : 1) : 0, v->spin_ns);
	pthread_mutex_lock(&v->ucx_mu); /* let go only around epoll_wait */
	while (!atomic_load(&v->stop)) {
		int n, i, timeout;
		long us;
		bool busy = psl__ucx_progress_once(v);

		timeout = psl__ucx_boot_tick(v);
		us = timeout < 0 ? -1 : (long)timeout * 1000;
		if (busy) {
			us = 0;
			pending_wait = PENDING_WAIT_MIN_US;
			psl_van_spin_auto_hit(&spin, &pa, psl_van_now_ns());
			/* more may be waiting in UCX: look again at once, at
			 * the sockets only every BUSY_SOCKET_ROUNDS rounds. A
			 * zero-timeout epoll_wait after each busy round was
			 * about one system call in seven of a one-key
			 * push-pull over shared memory (2.0-2.3 epoll_wait per
			 * request on the worker, 1.0-1.3 without); senders post
			 * through the inbox meanwhile */
			if (++busy_rounds % BUSY_SOCKET_ROUNDS && !atomic_load(&v->boot_dirty))
				continue;
		} else if (psl_van_spin_auto_spinning(&spin, &pa, psl_van_now_ns()) &&
			   spin_yield(v, &spin)) {
			/* PS_BUSY_POLL's window: poll again soon; the sockets every
			 * 64th round */
			if (++rounds & 63)
				continue;
			us = 0;
		} else if (!psl__ucx_aside(v, &us) && ucp_worker_arm(v->worker) == UCS_ERR_BUSY) {
			us = 0;
		} else {
			if (atomic_load(&v->requests) > 0) {
				if (us < 0 || us > pending_wait)
					us = pending_wait;
				if (pending_wait < PENDING_WAIT_MAX_US)
					pending_wait *= 2;
			}
			if (v->idle_wake_us >= 0 && (us < 0 || us > v->idle_wake_us))
				us = v->idle_wake_us;
			atomic_store(&v->sleeping, true);
			if (atomic_load(&v->inbox_full)) { /* see psl__ucx_kick */
				atomic_store(&v->sleeping, false);
				continue;
			}
		}
		pthread_mutex_unlock(&v->ucx_mu);
		n = wait_events(v, ev, 32, us);
		pthread_mutex_lock(&v->ucx_mu);
		atomic_store(&v->sleeping, false);
		for (i = 0; i < n; i++) {
			struct ucx_fdh *h = ev[i].data.ptr;
			switch (h->kind) {
			case FD_WAKE: {
				uint64_t x;
				ssize_t r = read(v->wake_fd, &x, sizeof(x));
				(void)r;
				atomic_store(&v->kicked, false);
				break;
			}
			case FD_LISTEN:
				psl__ucx_accept(v);
				break;
			case FD_OUT:
				psl__ucx_out_io((struct ucx_out *)(void *)h, ev[i].events);
				break;
			case FD_IN:
				psl__ucx_in_io((struct ucx_in *)(void *)h, ev[i].events);
				break;
			default: /* FD_WORKER: progress at the top of the loop */
				break;
			}
		}
	}
	pthread_mutex_unlock(&v->ucx_mu);
	psl_van_spin_report(v->host, UCX_LOGNAME, &spin);
	psl_van_spin_auto_report(v->host, UCX_LOGNAME, &pa);
	return NULL;
}

static int ubind(struct psl_van *v, const struct psl_van_bind_req *req,
		 struct psl_van_bind_res *res)
{
	struct epoll_event e;
	ucs_status_t st;
	int port = 0, rc;

	if (v->lfd >= 0)
		return -EALREADY;
	if (req->role == 2) /* the scheduler carries no data: it never polls */
		v->busy_poll = false;
	rc = psl__ucx_listen(v, req->host, req->port, &port);
	if (rc)
		return rc;
	v->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	v->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (v->wake_fd < 0 || v->epfd < 0) {
		rc = -errno;
		goto out_close;
	}
	st = ucp_worker_get_efd(v->worker, &v->efd);
	if (st != UCS_OK) {
		LOG(v, PSL_VAN_LOG_ERROR, "UCX gives no event fd to wait on: %s",
		    ucs_status_string(st));
		rc = -psl__ucx_errno(st);
		goto out_close;
	}
	e = (struct epoll_event){.events = EPOLLIN, .data.ptr = &v->h_wake};
	if (epoll_ctl(v->epfd, EPOLL_CTL_ADD, v->wake_fd, &e))
		goto out_errno;
	e = (struct epoll_event){.events = EPOLLIN, .data.ptr = &v->h_worker};
	if (epoll_ctl(v->epfd, EPOLL_CTL_ADD, v->efd, &e))
		goto out_errno;
	e = (struct epoll_event){.events = EPOLLIN, .data.ptr = &v->h_listen};
	if (epoll_ctl(v->epfd, EPOLL_CTL_ADD, v->lfd, &e))
		goto out_errno;
	pthread_mutex_lock(&v->inbox_mu);
	v->owner_active = true;
	pthread_mutex_unlock(&v->inbox_mu);
	v->running = true;
	rc = pthread_create(&v->thread, NULL, progress_main, v);
	if (rc) {
		v->running = false;
		pthread_mutex_lock(&v->inbox_mu);
		v->owner_active = false;
		pthread_mutex_unlock(&v->inbox_mu);
		rc = -rc;
		goto out_close;
	}
	res->port = port;
	res->addr_len = 0;
	LOG(v, PSL_VAN_LOG_INFO, "UCX %s: %s%s%s", v->ucx_version_str, v->transports,
	    (v->tl_found & UCXP_TL_RDMA) ? "" : "; no RDMA device found (InfiniBand/RoCE)",
	    (v->mem_caps & UCXP_MEM_CUDA) ? ""
					  : "; this UCX has no CUDA support: GPU segments will be "
					    "refused");
	LOG(v, PSL_VAN_LOG_DEBUG,
	    "bootstrap on %s, UCX worker address %zu bytes, progress by %s%s", v->listen_desc,
	    v->addr_len,
	    v->busy_poll ? (v->poll_auto ? "epoll and a poll window sized by the gaps "
					   "between messages (PS_BUSY_POLL=auto)"
					 : "epoll and a poll window (PS_BUSY_POLL=1)")
			 : "epoll on the worker's event fd",
	    v->rndv_put ? "; rendezvous by put (UCX_RNDV_SCHEME=put_zcopy)" : "");
	return 0;

out_errno:
	rc = -errno;
out_close:
	if (v->epfd >= 0)
		close(v->epfd);
	if (v->wake_fd >= 0)
		close(v->wake_fd);
	close(v->lfd);
	v->epfd = v->wake_fd = v->lfd = v->efd = -1;
	return rc;
}

static int uconnect(struct psl_van *v, const struct psl_van_peer *peer, int32_t my_id)
{
	struct ucx_out *o, *old;
	int id = peer->id, rc = 0;

	if (id < 1 || id > 65535 || !peer->host || !*peer->host || peer->port <= 0 ||
	    peer->port > 65535) {
		LOG(v, PSL_VAN_LOG_ERROR, "cannot connect to node %d at %s:%d: bad id or address",
		    id, peer->host ? peer->host : "(null)", peer->port);
		return -EINVAL;
	}
	o = psl__ucx_out_new(v, peer, my_id, &rc);
	if (!o)
		return rc;
	pthread_rwlock_wrlock(&v->lock);
	if (id >= v->npeers) {
		int n = id + 16;
		struct ucx_out **np = realloc(v->peers, sizeof(*np) * (size_t)n);
		if (!np) {
			pthread_rwlock_unlock(&v->lock);
			psl__ucx_out_free(o);
			return -ENOMEM;
		}
		memset(np + v->npeers, 0, sizeof(*np) * (size_t)(n - v->npeers));
		v->peers = np;
		v->npeers = n;
	}
	old = v->peers[id];
	v->peers[id] = o;
	pthread_rwlock_unlock(&v->lock);
	pthread_mutex_lock(&v->mu);
	o->next = v->outs;
	v->outs = o;
	pthread_mutex_unlock(&v->mu);
	if (old) {
		pthread_mutex_lock(&old->mu);
		old->retired = true;
		pthread_mutex_unlock(&old->mu);
	}
	atomic_store(&v->boot_dirty, true);
	psl__ucx_wake(v);
	if (my_id == PSL_VAN_ID_NONE)
		LOG(v, PSL_VAN_LOG_DEBUG, "connecting to %s, unregistered%s", o->desc,
		    old ? " (replacing the old connection)" : "");
	else
		LOG(v, PSL_VAN_LOG_DEBUG, "connecting to %s as node %d%s", o->desc, my_id,
		    old ? " (replacing the old connection)" : "");
	return 0;
}

static int udisconnect(struct psl_van *v, int32_t id)
{
	struct ucx_out *o = NULL;
	pthread_rwlock_wrlock(&v->lock);
	if (id >= 0 && id < v->npeers) {
		o = v->peers[id];
		v->peers[id] = NULL;
	}
	pthread_rwlock_unlock(&v->lock);
	if (!o)
		return -ENOENT;
	pthread_mutex_lock(&o->mu);
	o->retired = true;
	o->force = true;
	pthread_mutex_unlock(&o->mu);
	/* and what comes from it: a frozen node's rendezvous into lent buffers
	 * would hold its requests until it wakes up */
	pthread_mutex_lock(&v->mu);
	if (v->ngone < (int)(sizeof(v->gone) / sizeof(v->gone[0])))
		v->gone[v->ngone++] = id;
	pthread_mutex_unlock(&v->mu);
	atomic_store(&v->boot_dirty, true);
	psl__ucx_wake(v);
	return 0;
}

static int usend(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		 const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	return psl__ucx_send(v, id, meta, meta_len, segs, nseg, cookie);
}

/* Progress on the caller's thread (fini, after the progress thread ended). */
static void drain(struct psl_van *v, int64_t until, bool (*done)(struct psl_van *))
{
	while (!done(v) && psl_van_now_ms() < until) {
		if (!psl__ucx_progress_once(v))
			usleep(200);
		psl__ucx_boot_tick(v);
	}
}

static bool all_sent(struct psl_van *v)
{
	return atomic_load(&v->inflight) == 0;
}

static bool all_closed(struct psl_van *v)
{
	struct ucx_out *o;
	bool idle = true;
	pthread_mutex_lock(&v->mu);
	for (o = v->outs; o; o = o->next)
		if (o->close_req)
			idle = false;
	pthread_mutex_unlock(&v->mu);
	return idle && atomic_load(&v->inflight) == 0;
}

static bool none_lent_writing(struct psl_van *v)
{
	return v->lent_writing == 0;
}

/* Sends UCX still holds (their requests never completed, even cancelled:
 * seen with rc_verbs when the peer was killed mid-rendezvous) pin entries
 * of UCX's registration cache, and ucp_cleanup then aborts the process on
 * an assertion ("destroying inuse region"). The context is left to the
 * process's end instead: the memory of one context, once. */
static void keep_ctx_check(struct psl_van *v)
{
	uint32_t n = 0;
	struct ucx_send *s;

	pthread_mutex_lock(&v->sends_mu);
	for (s = v->sends; s; s = s->lnext)
		n++;
	pthread_mutex_unlock(&v->sends_mu);
	if (!n)
		return;
	v->keep_ctx = true;
	LOG(v, PSL_VAN_LOG_DEBUG,
	    "%u send(s) still held by UCX at fini: its context is left to the process's "
	    "end (ucp_cleanup would abort on their registrations)", n);
}

static void ufini(struct psl_van *v)
{
	struct ucx_out *o;
	uint32_t k;
	int64_t t0 = psl_van_now_ms();

	if (v->running) {
		atomic_store(&v->stop, true);
		psl__ucx_wake(v);
		pthread_join(v->thread, NULL);
		v->running = false;
	}
	/* this thread owns the worker from here on; late releases queue up
	 * on ucx_mu instead of the inbox */
	pthread_mutex_lock(&v->ucx_mu);
	pthread_mutex_lock(&v->inbox_mu);
	v->owner_active = false;
	atomic_store(&v->inbox_full, true); /* whatever is in it: take it */
	pthread_mutex_unlock(&v->inbox_mu);
	v->stopping = true; /* from here on: send_done only */
	/* what is in flight gets PS_UCX_LINGER_MS to arrive */
	drain(v, t0 + v->linger_ms, all_sent);
	/* and what arrives into memory the core lent, too: the core gets it
	 * back before fini returns */
	drain(v, psl_van_now_ms() + v->linger_ms + 1000, none_lent_writing);
	pthread_rwlock_wrlock(&v->lock);
	free(v->peers);
	v->peers = NULL;
	v->npeers = 0;
	pthread_rwlock_unlock(&v->lock);
	pthread_mutex_lock(&v->mu);
	for (o = v->outs; o; o = o->next) {
		pthread_mutex_lock(&o->mu);
		o->retired = true;
		pthread_mutex_unlock(&o->mu);
	}
	pthread_mutex_unlock(&v->mu);
	for (o = v->outs; o; o = o->next) /* cancels the rest: send_done(error) */
		psl__ucx_out_fail(o, PSL_VAN_PEER_DOWN, -ESHUTDOWN, "the van stops");
	drain(v, psl_van_now_ms() + 2000, all_closed);
	if ((k = (uint32_t)psl__ucx_fail_unfinished(v, -ETIMEDOUT)))
		LOG(v, PSL_VAN_LOG_WARN,
		    "%u send(s) did not complete before the van stopped: failed them", k);
	keep_ctx_check(v);
	while (v->outs && atomic_load(&v->inflight) == 0) { /* else UCX may still finish one */
		o = v->outs;
		v->outs = o->next;
		if (o->close_req)
			ucp_request_free(o->close_req);
		psl__ucx_out_free(o);
	}
	psl__ucx_rx_drop_ready(v);
	for (k = 0; k < v->nins; k++)
		psl__ucx_in_free(v->ins[k]);
	free(v->ins);
	v->ins = NULL;
	v->nins = 0;
	/* (left: the worker is not progressed any more, so UCX writes nothing
	 * more into them over TCP or shared memory) */
	if ((k = (uint32_t)psl__ucx_rx_orphan_loans(v)))
		LOG(v, PSL_VAN_LOG_WARN, "%u pull answer(s) still arriving when the van stopped",
		    k);
	if (v->lfd >= 0)
		close(v->lfd);
	if (v->epfd >= 0)
		close(v->epfd);
	if (v->wake_fd >= 0)
		close(v->wake_fd);
	v->lfd = v->epfd = v->wake_fd = -1;
	if (v->batches || v->joined)
		LOG(v, PSL_VAN_LOG_DEBUG,
		    "sent %llu messages in %llu batches, %llu with their data joined",
		    (unsigned long long)v->batched, (unsigned long long)v->batches,
		    (unsigned long long)v->joined);
	LOG(v, PSL_VAN_LOG_TRACE, "stopped in %lld ms", (long long)(psl_van_now_ms() - t0));
	pthread_mutex_unlock(&v->ucx_mu);
	psl__ucx_unref(v); /* the worker goes with the last message the core holds */
}

static const struct psl_van_ops ucx_ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = UCXP_VAN_NAME,
	.version = "pslite van_ucx " PSL_VAN_VERSION " (built with UCX " STR(
		UCP_API_MAJOR) "." STR(UCP_API_MINOR) ")",
	.description = "UCX active messages: shared memory, TCP, RDMA and CUDA memory where "
		       "UCX has them",
	.init = uinit,
	.fini = ufini,
	.query = uquery,
	.bind = ubind,
	.connect = uconnect,
	.disconnect = udisconnect,
	.send = usend,
	.progress = psl__ucx_drive,
};

PSL_VAN_DEFINE_ENTRY(ucx_ops)
