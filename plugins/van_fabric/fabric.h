/* van_fabric internals shared by its files. */
#ifndef PSL_VAN_FABRIC_H
#define PSL_VAN_FABRIC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <pslite/van.h>

#include "fab_mrcache.h"
#include "fab_proto.h"

#define VAN "fabric"
#define LOG(v, lvl, ...) psl_van_log((v)->host, (lvl), "van_fabric", __VA_ARGS__)

/* ------------------------------------------------------------- buffers -- */
/* Buffers the van owns: receive buffers for headers and for parts, and the
 * send-side headers. Registered once when the provider needs it, pooled by
 * size class, and able to outlive the van (the core may release a received
 * message after fini). */
#define FAB_POOL_CLASSES 15 /* 4 KiB << 0..14: up to 64 MiB */

enum fab_ctx_kind { CTX_TX_HDR = 1, CTX_TX_PART, CTX_RX_HDR, CTX_RX_PART };

/* The context of one posted operation: fi_context2 first (FI_CONTEXT2). */
struct fab_ctx {
	struct fi_context2 fc;
	uint8_t kind;
	uint8_t part;
	void *obj;
};

struct fab_pool;
struct fab_buf {
	struct fab_pool *pool;
	struct fab_buf *next;		  /* free list */
	struct fab_buf *all_prev, *all_next; /* every live buffer */
	size_t cap;
	int cls; /* size class, -1: not pooled */
	struct fid_mr *mr;
	void *desc;
	struct fab_ctx ctx; /* when posted as a header receive */
	bool posted;
	uint8_t *data;
};

struct fab_pool {
	pthread_mutex_t mu;
	int refs; /* the van, and every buffer out of the pool */
	bool dead;
	struct fid_domain *domain; /* NULL: nothing is registered */
	struct fid_ep *ep;	   /* for FI_MR_ENDPOINT */
	uint64_t mr_access;
	struct fab_buf *free[FAB_POOL_CLASSES];
	size_t cached, max_cached;
	struct fab_buf all;
	const struct psl_van_host *host;
};

int fab_pool_new(const struct psl_van_host *host, size_t max_cached, struct fab_pool **out);
/* Makes buffers registered from now on (call before the first get). */
void fab_pool_set_domain(struct fab_pool *p, struct fid_domain *d, struct fid_ep *ep,
			 bool mr_endpoint);
int fab_pool_get(struct fab_pool *p, size_t len, struct fab_buf **out);
void fab_pool_put(struct fab_buf *b);
/* Puts back every buffer still marked posted (the endpoint is closed). */
void fab_pool_put_posted(struct fab_pool *p);
/* The van is going: deregister everything, free what is idle; buffers still
 * out are freed at their put. Drops the van's reference. */
void fab_pool_kill(struct fab_pool *p);

/* ------------------------------------------------------------ bootstrap -- */
/* plain TCP helpers (fab_boot.c) */
void fab_numeric_host(const char *host, char *out, size_t len);
int fab_tcp_listen(const char *host, int port, int *fd, int *bound_port);
/* Non-blocking connect; 0 (connected or in progress) or -errno. */
int fab_tcp_connect(const char *host, int port, int *fd);
int fab_write_all(int fd, const void *buf, size_t len);
void fab_keepalive(int fd);
void fab_sockname(int fd, bool peer, char *out, size_t len);

#endif
