/*
 * van_ibverbs: pslite over RDMA verbs (DMLC_ENABLE_RDMA=ibverbs, or 1).
 *
 * bind() opens an rdmacm listener on the node's host and port: the address
 * picks the RDMA device (and its GID). connect() makes a link of one or more
 * RC queue pairs to the peer's listener (ibv_conn.c). A message is one record
 * in one of the peer's pre-posted receive buffers: meta and small segments
 * inline (an inline send when the record is small enough), larger segments
 * described by address and key and read by the receiver with RDMA READ
 * straight from the sender's registered memory into the worker's own buffer
 * (recv_dest) or a pooled registered one, after which it answers FIN
 * (ibv_xfer.c). Credits keep every send matched by a posted receive. One
 * progress thread polls the completion queues while busy and sleeps on the
 * completion channel, the rdmacm channel and a wake-up eventfd when idle; a
 * thread waiting for a reply may poll them itself (ibv_progress.c).
 * Connections to C++ ps-lite nodes speak their RDMA van's protocol instead
 * (ibv_cxxio.c). See docs/van-ibverbs.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "ibv.h"

#ifndef PSL_VAN_VERSION
#define PSL_VAN_VERSION "0"
#endif

/* -------------------------------------------------------------- events -- */

struct ibv_event *ibv_ev_new(struct psl_van *v, int kind)
{
	struct ibv_event *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = kind;
	if (v->ev_tail)
		v->ev_tail->next = e;
	else
		v->ev_head = e;
	v->ev_tail = e;
	return e;
}

/* Runs the host callbacks collected under the lock; call unlocked. */
void ibv_flush_events(struct psl_van *v)
{
	struct ibv_event *e, *n;
	const struct psl_van_host *h = v->host;

	pthread_mutex_lock(&v->mu);
	e = v->ev_head;
	v->ev_head = v->ev_tail = NULL;
	pthread_mutex_unlock(&v->mu);
	for (; e; e = n) {
		n = e->next;
		switch (e->kind) {
		case 1:
			h->send_done(h->ctx, e->cookie, e->status);
			break;
		case 2:
			h->recv(h->ctx, e->msg);
			break;
		case 3:
			h->peer_event(h->ctx, e->id, e->pev, e->status,
				      e->detail[0] ? e->detail : NULL);
			break;
		case 4:
			if (h->size >= PSL_VAN_HOST_SIZE_1_1 && h->recv_dest_put)
				h->recv_dest_put(h->ctx, e->cookie, e->status);
			break;
		}
		free(e);
	}
}

void ibv_wake(struct psl_van *v)
{
	uint64_t one = 1;
	if (v->wake_fd >= 0 && write(v->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: the thread wakes anyway */
	}
}

/* ---------------------------------------------------------------- init -- */

static int read_settings(struct psl_van *v)
{
	const struct psl_van_host *h = v->host;
	long mrc = 1, lag = 0, ports = 1;
	bool busy = false;
	int64_t spin_ns = 0;
	const char *lag_var;
	int bad = 0;

	bad |= psl_van_param_long(h, VAN, "BYTEPS_RDMA_RX_DEPTH", 256, 4, 65535,
				  "a receive queue depth", &v->rx_depth);
	bad |= psl_van_param_long(h, VAN, "BYTEPS_RDMA_START_DEPTH", 128, 1, 16384,
				  "a send depth", &v->start_depth);
	bad |= psl_van_param_long(h, VAN, "DMLC_NUM_PORTS", 1, 1, IBV_MAX_QPS,
				  "a number of ports", &ports);
	/* StepMesh's name for it, when ps-lite's is not set */
	lag_var = psl_van_param(h, "DMLC_SPLIT_QP_LAG") || !psl_van_param(h, "STEPMESH_SPLIT_QP_LAG")
			  ? "DMLC_SPLIT_QP_LAG"
			  : "STEPMESH_SPLIT_QP_LAG";
	bad |= psl_van_param_long(h, VAN, lag_var, 0, -1, IBV_MAX_QPS,
				  "a number of queue pairs per peer (0 auto, -1 off)", &lag);
	bad |= psl_van_param_long(h, VAN, "PS_CONNECT_TIMEOUT", 60, 1, 86400, "seconds",
				  &v->connect_s);
	bad |= psl_van_busy_poll_plain(h, VAN, &busy, &spin_ns);
	bad |= psl_van_param_long(h, VAN, "PS_IBV_MR_CACHE", 1, 0, 1, NULL, &mrc);
	bad |= psl_van_param_long(h, VAN, "BYTEPS_ADDRESS_POOL_SIZE", IBV_CXX_POOL_DEFAULT, 1,
				  1 << 24, "a number of buffers", &v->cx_pool_max);
	bad |= psl_van_param_long(h, VAN, "PS_IBV_MR_CACHE_SIZE", 1024, 1, 1 << 20,
				  "a number of registrations", &v->mr_cache_max);
	if (bad)
		return -EINVAL;
	v->busy_poll = busy;
	v->spin_ns = spin_ns;
	v->mr_cache_on = mrc != 0;
	v->nports = ports;
	/* queue pairs per link: DMLC_SPLIT_QP_LAG when set (0: one per active
	 * port, found at bind), else DMLC_NUM_PORTS */
	v->split_qp = lag > 0 ? lag : lag < 0 ? 1 : 0;
	if (!psl_van_param(h, lag_var))
		v->split_qp = ports;
	return 0;
}

static uint64_t nonce64(void)
{
	uint64_t x = 0;
	if (getrandom(&x, sizeof(x), 0) != sizeof(x))
		x = (uint64_t)psl_van_now_ns() ^ ((uint64_t)getpid() << 32);
	return x ? x : 1;
}

static int vinit(const struct psl_van_host *host, struct psl_van **out)
{
	struct psl_van *v = calloc(1, sizeof(*v));
	int rc, fl;

	if (!v)
		return -ENOMEM;
	v->host = host;
	v->secret = psl_van_secret(host);
	v->wake_fd = -1;
	v->pagemap_fd = -1;
	rc = read_settings(v);
	if (rc)
		goto fail;
	rc = ibv_dev_check(v);
	if (rc)
		goto fail;
	if (v->split_qp == 0)
		v->split_qp = 1; /* auto: refined at bind */
	rc = ibv_dev_memlock_check(v);
	if (rc)
		goto fail;
	if (v->mr_cache_on)
		ibv_dev_pagemap_open(v);
	v->ch = rdma_create_event_channel();
	if (!v->ch) {
		rc = errno ? -errno : -ENODEV;
		LOG(v, PSL_VAN_LOG_ERROR, "rdma_create_event_channel: %s (is rdma_ucm loaded?)",
		    strerror(-rc));
		goto fail;
	}
	fl = fcntl(v->ch->fd, F_GETFL);
	fcntl(v->ch->fd, F_SETFL, fl | O_NONBLOCK);
	v->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (v->wake_fd < 0) {
		rc = -errno;
		goto fail;
	}
	pthread_mutex_init(&v->mu, NULL);
	pthread_mutex_init(&v->rx_mu, NULL);
	if (pthread_create(&v->thread, NULL, ibv_progress_main, v)) {
		rc = -EAGAIN;
		pthread_mutex_destroy(&v->rx_mu);
		pthread_mutex_destroy(&v->mu);
		goto fail;
	}
	v->thread_on = true;
	*out = v;
	return 0;
fail:
	if (v->wake_fd >= 0)
		close(v->wake_fd);
	if (v->pagemap_fd >= 0)
		close(v->pagemap_fd);
	if (v->ch)
		rdma_destroy_event_channel(v->ch);
	free(v);
	return rc;
}

static void log_counters(struct psl_van *v, struct ibv_link *l)
{
	char buf[256];
	size_t off = 0;
	int i;
	for (i = 0; i < l->nqp && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s qp%d %llu", i ? "," : "",
					i, l->q[i] ? (unsigned long long)l->q[i]->msgs : 0ULL);
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d: records sent per queue pair:%s", l->id, buf);
}

static void vfini(struct psl_van *v)
{
	struct ibv_link *l;
	struct ibv_stream *s;

	atomic_store(&v->stop, true);
	ibv_wake(v);
	if (v->thread_on)
		pthread_join(v->thread, NULL);
	pthread_mutex_lock(&v->rx_mu); /* a caller still polling (progress) ends */
	pthread_mutex_lock(&v->mu);
	for (l = v->links; l; l = l->next)
		log_counters(v, l);
	while ((l = v->links)) {
		v->links = l->next;
		ibv_link_free(v, l);
	}
	while ((s = v->streams)) {
		v->streams = s->next;
		ibv_stream_free(v, s);
	}
	while (v->qs)
		ibv_q_destroy(v, v->qs);
	ibv_cxx_fini(v);
	pthread_mutex_unlock(&v->mu);
	ibv_flush_events(v);
	pthread_mutex_unlock(&v->rx_mu);
	if (v->mrc_ready) {
		ibv_mrc_fini(&v->mrc);
		ibv_pool_kill(v->pool);
	}
	if (v->listen)
		rdma_destroy_id(v->listen);
	if (v->comp)
		ibv_destroy_comp_channel(v->comp);
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	rdma_destroy_event_channel(v->ch);
	close(v->wake_fd);
	if (v->pagemap_fd >= 0)
		close(v->pagemap_fd);
	pthread_mutex_destroy(&v->rx_mu);
	pthread_mutex_destroy(&v->mu);
	free(v);
}

static int vquery(struct psl_van *v, struct psl_van_caps *caps)
{
	if (!caps || caps->size < sizeof(*caps))
		return -EINVAL;
	caps->flags = PSL_VAN_CAP_ZC_SEND | PSL_VAN_CAP_ZC_RECV | PSL_VAN_CAP_MEM_HOST;
	caps->max_msg_size = 1u << 31;
	ibv_dev_describe(v, caps->transports, sizeof(caps->transports));
	return 0;
}

/* DMLC_SPLIT_QP_LAG=0: one queue pair per active port of the device. */
static void auto_qps(struct psl_van *v)
{
	struct ibv_device_attr da;
	int p, active = 0;
	if (!v->verbs || ibv_query_device(v->verbs, &da))
		return;
	for (p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		if (!ibv_query_port(v->verbs, (uint8_t)p, &pa) && pa.state == IBV_PORT_ACTIVE)
			active++;
	}
	if (active > 1)
		v->split_qp = active > IBV_MAX_QPS ? IBV_MAX_QPS : active;
}

static int vbind(struct psl_van *v, const struct psl_van_bind_req *req,
		 struct psl_van_bind_res *res)
{
	int rc, port = 0;
	const char *lag = psl_van_param(v->host, "DMLC_SPLIT_QP_LAG");

	pthread_mutex_lock(&v->mu);
	if (v->bound) {
		pthread_mutex_unlock(&v->mu);
		return -EALREADY;
	}
	snprintf(v->bind_host, sizeof(v->bind_host), "%s", req->host ? req->host : "");
	v->role = req->role;
	rc = ibv_listen(v, v->bind_host, req->port, &port);
	if (!rc) {
		v->bound = true;
		v->port = port;
		if (lag && strcmp(lag, "0") == 0)
			auto_qps(v);
	}
	pthread_mutex_unlock(&v->mu);
	if (rc)
		return rc;
	memset(res, 0, sizeof(*res));
	res->port = port;
	res->addr_len = 0;
	LOG(v, PSL_VAN_LOG_DEBUG, "listening on %s:%d (%s), %ld queue pair%s per peer",
	    v->bind_host, port, v->verbs ? ibv_get_device_name(v->verbs->device) : "device at "
	    "first connection", v->split_qp, v->split_qp > 1 ? "s" : "");
	return 0;
}

static struct ibv_link *find_link(struct psl_van *v, int32_t id)
{
	struct ibv_link *l;
	for (l = v->links; l; l = l->next)
		if (l->id == id && !l->retired)
			return l;
	return NULL;
}

static int vconnect(struct psl_van *v, const struct psl_van_peer *peer, int32_t my_id)
{
	struct ibv_link *l, *old;
	int64_t now = psl_van_now_ms();

	if (!peer || !peer->host || peer->port <= 0 || peer->port > 65535)
		return -EINVAL;
	pthread_mutex_lock(&v->mu);
	old = find_link(v, peer->id);
	if (old && old->state != L_DOWN && old->my_id == my_id && old->port == peer->port &&
	    strcmp(old->host, peer->host) == 0) {
		pthread_mutex_unlock(&v->mu);
		return 0;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		pthread_mutex_unlock(&v->mu);
		return -ENOMEM;
	}
	if (old)
		old->retired = true;
	l->id = peer->id;
	l->my_id = my_id;
	snprintf(l->host, sizeof(l->host), "%s", peer->host);
	l->port = peer->port;
	snprintf(l->where, sizeof(l->where), "%s:%d", peer->host, peer->port);
	l->nqp = (int)v->split_qp;
	if (ibv_cxx_known(v, l->where)) {
		l->cxx = true; /* met before: C++'s protocol from the start */
		l->nqp = 1;
	}
	if (my_id != PSL_VAN_ID_NONE)
		v->last_my_id = my_id;
	l->nonce = nonce64();
	l->next_seq = 0;
	l->deadline_ms = now + v->connect_s * 1000 + 5000;
	l->retry_at_ms = now;
	l->retry_ms = 50;
	ibv_probe_init(&l->probe);
	snprintf(l->last_why, sizeof(l->last_why), "no answer");
	l->next = v->links;
	v->links = l;
	pthread_mutex_unlock(&v->mu);
	LOG(v, PSL_VAN_LOG_DEBUG, "node %d: connecting to %s as node %d%s", l->id, l->where, my_id,
	    old ? " (replacing the earlier link)" : "");
	ibv_wake(v);
	return 0;
}

static int vdisconnect(struct psl_van *v, int32_t id)
{
	struct ibv_link *l;
	pthread_mutex_lock(&v->mu);
	for (l = v->links; l; l = l->next)
		if (l->id == id)
			l->retired = true;
	pthread_mutex_unlock(&v->mu);
	ibv_wake(v);
	return 0;
}

static int vsend(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		 const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	struct ibv_link *l;
	int rc;

	pthread_mutex_lock(&v->mu);
	l = find_link(v, id);
	if (!l)
		rc = -ENOTCONN;
	else if (l->state == L_DOWN || l->state == L_CLOSING)
		rc = -ECONNRESET;
	else
		rc = ibv_send_msg(v, l, meta, meta_len, segs, nseg, cookie);
	pthread_mutex_unlock(&v->mu);
	return rc;
}

static int vreg_mem(struct psl_van *v, void *addr, size_t len, int32_t mem_type, int32_t dev_id,
		    void **mr)
{
	struct ibv_mrc_ent *e;
	int rc;
	(void)dev_id;
	if (mem_type != PSL_MEM_HOST)
		return -EOPNOTSUPP;
	if (!v->mrc_ready)
		return -EAGAIN;
	rc = ibv_mrc_get(&v->mrc, addr, len, &e);
	if (rc == 0)
		*mr = e;
	return rc;
}

static int vdereg_mem(struct psl_van *v, void *mr)
{
	struct ibv_mrc_ent *e = mr;
	if (!e || !v->mrc_ready)
		return -EINVAL;
	ibv_mrc_invalidate(&v->mrc, (void *)e->start, e->end - e->start);
	ibv_mrc_put(&v->mrc, e);
	return 0;
}

static const struct psl_van_ops ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = "ibverbs",
	.version = PSL_VAN_VERSION " (libibverbs, librdmacm)",
	.description = "RDMA verbs: RC queue pairs over rdmacm, eager sends and RDMA READ "
		       "rendezvous",
	.init = vinit,
	.fini = vfini,
	.query = vquery,
	.bind = vbind,
	.connect = vconnect,
	.disconnect = vdisconnect,
	.send = vsend,
	.reg_mem = vreg_mem,
	.dereg_mem = vdereg_mem,
	.progress = ibv_drive,
};

PSL_VAN_DEFINE_ENTRY(ops)
