/* van_fabric: the van's own buffers (see fabric.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "fabric.h"

#define BASE 4096u
/* struct fab_buf sits before the data, in one allocation */
#define HDR_ROOM ((sizeof(struct fab_buf) + 63) & ~(size_t)63)

int fab_pool_new(const struct psl_van_host *host, size_t max_cached, struct fab_pool **out)
{
	struct fab_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	p->refs = 1;
	p->max_cached = max_cached;
	p->all.all_next = p->all.all_prev = &p->all;
	p->host = host;
	*out = p;
	return 0;
}

uint64_t fab_next_key(void)
{
	static atomic_uint_fast64_t key = 1;
	return atomic_fetch_add(&key, 1);
}

void fab_pool_set_domain(struct fab_pool *p, struct fid_domain *d, struct fid_ep *ep,
			 uint64_t mr_mode)
{
	p->domain = d;
	p->ep = (mr_mode & FI_MR_ENDPOINT) ? ep : NULL;
	p->app_keys = !(mr_mode & FI_MR_PROV_KEY);
	p->mr_access = FI_SEND | FI_RECV;
}

static int cls_of(size_t len, size_t *cap)
{
	int k;
	for (k = 0; k < FAB_POOL_CLASSES; k++)
		if (len <= ((size_t)BASE << k)) {
			*cap = (size_t)BASE << k;
			return k;
		}
	*cap = len;
	return -1;
}

static void unlink_all(struct fab_buf *b)
{
	b->all_prev->all_next = b->all_next;
	b->all_next->all_prev = b->all_prev;
}

static void buf_free(struct fab_buf *b)
{
	if (b->mr)
		fi_close(&b->mr->fid);
	free(b);
}

static void pool_unref_locked(struct fab_pool *p, bool *gone)
{
	*gone = --p->refs == 0;
}

static void pool_destroy(struct fab_pool *p)
{
	pthread_mutex_destroy(&p->mu);
	free(p);
}

int fab_pool_get(struct fab_pool *p, size_t len, struct fab_buf **out)
{
	struct fab_buf *b = NULL;
	size_t cap;
	int k = cls_of(len, &cap), rc;

	pthread_mutex_lock(&p->mu);
	if (k >= 0 && p->free[k]) {
		b = p->free[k];
		p->free[k] = b->next;
		p->cached -= b->cap;
	}
	if (b) {
		p->refs++;
		pthread_mutex_unlock(&p->mu);
		*out = b;
		return 0;
	}
	pthread_mutex_unlock(&p->mu);
	if (posix_memalign((void **)&b, 64, HDR_ROOM + cap) != 0)
		return -ENOMEM;
	memset(b, 0, sizeof(*b));
	b->pool = p;
	b->cap = cap;
	b->cls = k;
	b->data = (uint8_t *)b + HDR_ROOM;
	if (p->domain) {
		rc = fi_mr_reg(p->domain, b->data, cap, p->mr_access, 0,
			       p->app_keys ? fab_next_key() : 0, 0, &b->mr, NULL);
		if (!rc && p->ep) {
			rc = fi_mr_bind(b->mr, &p->ep->fid, 0);
			if (!rc)
				rc = fi_mr_enable(b->mr);
		}
		if (rc) {
			psl_van_log(p->host, PSL_VAN_LOG_ERROR, "van_fabric",
				    "cannot register a %zu-byte buffer: %s (raise 'ulimit -l', the "
				    "locked-memory limit, or lower PS_FABRIC_POOL_MB)",
				    cap, fi_strerror((int)-rc));
			if (b->mr)
				fi_close(&b->mr->fid);
			free(b);
			return rc == -FI_ENOMEM ? -ENOMEM : -EIO;
		}
		b->desc = fi_mr_desc(b->mr);
	}
	pthread_mutex_lock(&p->mu);
	p->refs++;
	b->all_next = p->all.all_next;
	b->all_prev = &p->all;
	p->all.all_next->all_prev = b;
	p->all.all_next = b;
	pthread_mutex_unlock(&p->mu);
	*out = b;
	return 0;
}

void fab_pool_put(struct fab_buf *b)
{
	struct fab_pool *p;
	bool gone, keep;
	if (!b)
		return;
	p = b->pool;
	pthread_mutex_lock(&p->mu);
	keep = !p->dead && b->cls >= 0 && p->cached + b->cap <= p->max_cached;
	if (keep) {
		b->next = p->free[b->cls];
		p->free[b->cls] = b;
		p->cached += b->cap;
	} else {
		unlink_all(b);
	}
	pool_unref_locked(p, &gone);
	pthread_mutex_unlock(&p->mu);
	if (!keep)
		buf_free(b);
	if (gone)
		pool_destroy(p);
}

void fab_pool_kill(struct fab_pool *p)
{
	struct fab_buf *b, *idle = NULL;
	bool gone;
	int k;

	pthread_mutex_lock(&p->mu);
	p->dead = true;
	for (b = p->all.all_next; b != &p->all; b = b->all_next) {
		if (b->mr)
			fi_close(&b->mr->fid);
		b->mr = NULL;
		b->desc = NULL;
	}
	for (k = 0; k < FAB_POOL_CLASSES; k++) {
		while ((b = p->free[k])) {
			p->free[k] = b->next;
			unlink_all(b);
			b->next = idle;
			idle = b;
		}
	}
	p->cached = 0;
	p->domain = NULL;
	p->ep = NULL;
	pool_unref_locked(p, &gone);
	pthread_mutex_unlock(&p->mu);
	while (idle) {
		b = idle->next;
		free(idle);
		idle = b;
	}
	if (gone)
		pool_destroy(p);
}

void fab_pool_put_posted(struct fab_pool *p)
{
	struct fab_buf *b, *list = NULL;
	pthread_mutex_lock(&p->mu);
	for (b = p->all.all_next; b != &p->all; b = b->all_next)
		if (b->posted) {
			b->posted = false;
			b->next = list;
			list = b;
		}
	pthread_mutex_unlock(&p->mu);
	while (list) {
		b = list->next;
		fab_pool_put(list);
		list = b;
	}
}
