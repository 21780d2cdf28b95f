/*
 * van_ibverbs device side: is there an ibverbs device at all, what it offers
 * (the string pslite-info shows), the locked-memory limit, and the
 * protection domain, completion channel, registration cache and buffer pool
 * of the device that rdmacm chose for the bind address.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ibv.h"

int ibv_dev_check(struct psl_van *v)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	int err = errno;

	if (l)
		ibv_free_device_list(l);
	if (!l || n == 0) {
		LOG(v, PSL_VAN_LOG_INFO,
		    "DMLC_ENABLE_RDMA=ibverbs but this machine has no ibverbs device "
		    "(ibv_get_device_list found none): load the driver of the RDMA NIC "
		    "(or soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev "
		    "eth0), or choose another van (DMLC_ENABLE_RDMA=zmq, ucx or fabric)%s%s%s",
		    l ? "" : " [libibverbs: ", l ? "" : strerror(err), l ? "" : "]");
		return -ENODEV;
	}
	return 0;
}

static const char *link_layer(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET:
		return "Ethernet/RoCE";
	default:
		return "unknown";
	}
}

static const char *port_state(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_ACTIVE:
		return "active";
	case IBV_PORT_DOWN:
		return "down";
	case IBV_PORT_INIT:
		return "init";
	case IBV_PORT_ARMED:
		return "armed";
	default:
		return "not active";
	}
}

static void memlock_str(char *buf, size_t cap)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_MEMLOCK, &rl))
		snprintf(buf, cap, "unknown");
	else if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(buf, cap, "unlimited");
	else
		snprintf(buf, cap, "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
}

/* "rxe0 port 1 Ethernet/RoCE active gid 0 fe80::..., 1 ::ffff:10.0.0.2;
 * memlock unlimited" */
void ibv_dev_describe(struct psl_van *v, char *buf, size_t cap)
{
	struct ibv_device **l;
	int n = 0, i;
	size_t off = 0;
	char ml[32];

	(void)v;
	buf[0] = '\0';
	l = ibv_get_device_list(&n);
	for (i = 0; l && i < n && off + 1 < cap; i++) {
		struct ibv_context *c = ibv_open_device(l[i]);
		struct ibv_device_attr da;
		uint8_t p;
		if (!c) {
			off += (size_t)snprintf(buf + off, cap - off, "%s%s (cannot open)",
						off ? "; " : "", ibv_get_device_name(l[i]));
			continue;
		}
		if (ibv_query_device(c, &da))
			da.phys_port_cnt = 1;
		for (p = 1; p <= da.phys_port_cnt && off + 1 < cap; p++) {
			struct ibv_port_attr pa;
			int g, shown = 0;
			if (ibv_query_port(c, p, &pa))
				continue;
			off += (size_t)snprintf(buf + off, cap - off, "%s%s port %u %s %s",
						off ? "; " : "", ibv_get_device_name(l[i]), p,
						link_layer(pa.link_layer), port_state(pa.state));
			for (g = 0; g < pa.gid_tbl_len && shown < 4 && off + 1 < cap; g++) {
				union ibv_gid gid;
				char s[INET6_ADDRSTRLEN];
				static const uint8_t zero[16];
				if (ibv_query_gid(c, p, g, &gid) || !memcmp(gid.raw, zero, 16))
					continue;
				if (!inet_ntop(AF_INET6, gid.raw, s, sizeof(s)))
					continue;
				off += (size_t)snprintf(buf + off, cap - off, "%s%d %s",
							shown ? ", " : " gid ", g, s);
				shown++;
			}
		}
		ibv_close_device(c);
	}
	if (l)
		ibv_free_device_list(l);
	if (off + 1 >= cap)
		off = cap - 1;
	memlock_str(ml, sizeof(ml));
	snprintf(buf + off, cap - off, "%smemlock %s", off ? "; " : "", ml);
}

/* What one connection's queues lock in memory, with the defaults in force. */
static uint64_t queue_bytes(struct psl_van *v)
{
	uint64_t rx = (uint64_t)(v->rx_depth + IBV_CR_RESERVE) * IBV_EAGER_BUF;
	uint64_t tx = (uint64_t)v->start_depth * IBV_EAGER_BUF;
	return (uint64_t)v->split_qp * (rx + tx + (uint64_t)(v->rx_depth + IBV_CR_RESERVE) *
							 IBV_CTL_BUF);
}

int ibv_dev_memlock_check(struct psl_van *v)
{
	struct rlimit rl;
	uint64_t need = queue_bytes(v);

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= need)
		return 0;
	if (geteuid() == 0) {
		/* root normally has CAP_IPC_LOCK: the limit does not apply */
		LOG(v, PSL_VAN_LOG_DEBUG, "memlock limit %llu KiB below %llu KiB, running as root",
		    (unsigned long long)rl.rlim_cur / 1024, (unsigned long long)need / 1024);
		return 0;
	}
	LOG(v, PSL_VAN_LOG_ERROR,
	    "the locked-memory limit is %llu KiB but one connection's RDMA queues need %llu "
	    "KiB (BYTEPS_RDMA_RX_DEPTH=%ld, BYTEPS_RDMA_START_DEPTH=%ld, DMLC_SPLIT_QP_LAG "
	    "queue pairs %ld), and every peer needs as much: raise it (ulimit -l unlimited; "
	    "LimitMEMLOCK=infinity in a systemd unit; --ulimit memlock=-1 for docker) or "
	    "lower the depths",
	    (unsigned long long)rl.rlim_cur / 1024, (unsigned long long)need / 1024, v->rx_depth,
	    v->start_depth, v->split_qp);
	return -ENOMEM;
}

const char *ibv_dev_reg_hint(int err)
{
	if (err == -ENOMEM || err == -EPERM || err == -EAGAIN)
		return " (is the locked-memory limit too low? ulimit -l, LimitMEMLOCK)";
	return "";
}

int ibv_mrc_reg_cb(void *ctx, void *addr, size_t len, void **mr)
{
	struct psl_van *v = ctx;
	struct ibv_mr *m = ibv_reg_mr(v->pd, addr, len,
				      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
					      IBV_ACCESS_REMOTE_WRITE);
	if (!m) {
		int err = errno ? -errno : -ENOMEM;
		LOG(v, PSL_VAN_LOG_ERROR, "cannot register %zu bytes at %p with %s: %s%s", len,
		    addr, ibv_get_device_name(v->verbs->device), strerror(-err),
		    ibv_dev_reg_hint(err));
		return err;
	}
	*mr = m;
	return 0;
}

void ibv_mrc_dereg_cb(void *ctx, void *mr)
{
	(void)ctx;
	ibv_dereg_mr(mr);
}

/* The first device a connection lands on becomes the van's: one protection
 * domain, one completion channel. */
int ibv_dev_attach(struct psl_van *v, struct ibv_context *ctx)
{
	int rc, fl;
	if (!ctx)
		return -ENODEV;
	if (v->verbs) {
		if (v->verbs == ctx)
			return 0;
		LOG(v, PSL_VAN_LOG_ERROR,
		    "a connection went through RDMA device %s but this node uses %s: set "
		    "DMLC_NODE_HOST (or DMLC_INTERFACE) to the address of one RDMA device",
		    ibv_get_device_name(ctx->device), ibv_get_device_name(v->verbs->device));
		return -EXDEV;
	}
	v->pd = ibv_alloc_pd(ctx);
	if (!v->pd)
		return errno ? -errno : -ENOMEM;
	v->comp = ibv_create_comp_channel(ctx);
	if (!v->comp) {
		rc = errno ? -errno : -ENOMEM;
		goto fail_pd;
	}
	fl = fcntl(v->comp->fd, F_GETFL);
	fcntl(v->comp->fd, F_SETFL, fl | O_NONBLOCK);
	rc = ibv_mrc_init(&v->mrc, (size_t)v->mr_cache_max, v->mr_cache_on, ibv_mrc_reg_cb,
			  ibv_mrc_dereg_cb, v);
	if (rc)
		goto fail_comp;
	if (v->pagemap_fd >= 0)
		v->mrc.stamp = ibv_mrc_stamp_cb;
	rc = ibv_pool_new(v->pd, &v->pool);
	if (rc)
		goto fail_mrc;
	v->mrc_ready = true;
	v->verbs = ctx;
	LOG(v, PSL_VAN_LOG_DEBUG, "using RDMA device %s", ibv_get_device_name(ctx->device));
	ibv_wake(v); /* the progress thread now watches the completion channel */
	return 0;
fail_mrc:
	ibv_mrc_fini(&v->mrc);
fail_comp:
	ibv_destroy_comp_channel(v->comp);
	v->comp = NULL;
fail_pd:
	ibv_dealloc_pd(v->pd);
	v->pd = NULL;
	return rc;
}

/* The registration cache's fingerprint: the page frame numbers of the first,
 * middle and last page (from /proc/self/pagemap, readable with them where the
 * process has CAP_SYS_ADMIN). A registration pins its pages, so the same
 * addresses showing other frames means the memory was freed and mapped again:
 * the cached registration describes the old pages and must go. */
static bool pfn_of(int fd, uintptr_t addr, long pg, uint64_t *pfn)
{
	uint64_t e;
	if (pread(fd, &e, sizeof(e), (off_t)(addr / (uintptr_t)pg) * 8) != sizeof(e))
		return false;
	*pfn = (e >> 63) ? (e & ((1ull << 55) - 1)) : 0;
	return true;
}

bool ibv_mrc_stamp_cb(void *ctx, uintptr_t start, uintptr_t end, uint64_t *stamp)
{
	struct psl_van *v = ctx;
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t a, b, c;
	uintptr_t last;
	if (v->pagemap_fd < 0 || pg <= 0 || end <= start)
		return false;
	last = (end - 1) & ~((uintptr_t)pg - 1);
	if (!pfn_of(v->pagemap_fd, start, pg, &a) || !pfn_of(v->pagemap_fd, last, pg, &b) ||
	    !pfn_of(v->pagemap_fd, start + ((last - start) / 2 & ~((uintptr_t)pg - 1)), pg, &c))
		return false;
	*stamp = a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full ^ c;
	return true;
}

/* Opens /proc/self/pagemap when it shows frame numbers to this process. */
void ibv_dev_pagemap_open(struct psl_van *v)
{
	static uint64_t probe = 1;
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t pfn = 0;
	v->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (v->pagemap_fd < 0)
		return;
	probe++;
	if (pg <= 0 || !pfn_of(v->pagemap_fd, (uintptr_t)&probe, pg, &pfn) || pfn == 0) {
		close(v->pagemap_fd);
		v->pagemap_fd = -1;
		LOG(v, PSL_VAN_LOG_DEBUG,
		    "registration cache: page frames not visible to this process; a buffer "
		    "freed and allocated again at the same address keeps its old registration "
		    "(PS_IBV_MR_CACHE=0 registers every send)");
	}
}

/* An IPv4 address of this machine's first RDMA port that has one (its
 * IPv4-mapped GID), for peers advertised as 127.x.x.x: rdmacm cannot reach
 * a loopback address through a RoCE device, but the device's own address
 * reaches this machine. 0 when there is none. */
uint32_t ibv_dev_local_ipv4(void)
{
	struct ibv_device **l;
	int n = 0, i;
	uint32_t found = 0;

	l = ibv_get_device_list(&n);
	for (i = 0; l && i < n && !found; i++) {
		struct ibv_context *c = ibv_open_device(l[i]);
		struct ibv_device_attr da;
		uint8_t p;
		if (!c)
			continue;
		if (ibv_query_device(c, &da))
			da.phys_port_cnt = 1;
		for (p = 1; p <= da.phys_port_cnt && !found; p++) {
			struct ibv_port_attr pa;
			int g;
			if (ibv_query_port(c, p, &pa) || pa.state != IBV_PORT_ACTIVE)
				continue;
			for (g = 0; g < pa.gid_tbl_len && g < 16 && !found; g++) {
				union ibv_gid gid;
				static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
				if (ibv_query_gid(c, p, g, &gid) || memcmp(gid.raw, pre, 12))
					continue;
				memcpy(&found, gid.raw + 12, 4);
			}
		}
		ibv_close_device(c);
	}
	if (l)
		ibv_free_device_list(l);
	return found;
}
