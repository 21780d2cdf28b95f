/* KV helpers shared by the worker and the server: element sizes, shared
 * copies of request and response data, the meta's data fields. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "cuda.h"
#include "cuda_after.h"
#include "kv.h"

size_t psl_dtype_size(enum psl_dtype dt)
{
	switch (dt) {
	case PSL_INT8:
	case PSL_UINT8:
	case PSL_BYTES:
	case PSL_BOOL:
		return 1;
	case PSL_INT16:
	case PSL_UINT16:
	case PSL_FLOAT16:
	case PSL_BFLOAT16:
		return 2;
	case PSL_INT32:
	case PSL_UINT32:
	case PSL_FLOAT32:
		return 4;
	case PSL_INT64:
	case PSL_UINT64:
	case PSL_FLOAT64:
		return 8;
	}
	return 0;
}

static void copy_done(struct psl__sendref *ref, int status)
{
	(void)status;
	psl__kv_copy_put((struct psl__kv_copy *)ref);
}

struct psl__kv_copy *psl__kv_copy_new(size_t bytes, int refs)
{
	struct psl__kv_copy *cp = malloc(sizeof(*cp) + bytes);
	if (!cp)
		return NULL;
	cp->ref.done = copy_done;
	atomic_init(&cp->refs, refs);
	cp->user_done = NULL;
	cp->user_arg = NULL;
	cp->stage = NULL;
	return cp;
}

void psl__kv_copy_put(struct psl__kv_copy *cp)
{
	if (cp && atomic_fetch_sub(&cp->refs, 1) == 1) {
		if (cp->user_done)
			cp->user_done(cp->user_arg);
		psl__cuda_stage_put(cp->stage);
		free(cp);
	}
}

void psl__kv_meta_data(struct psl__meta *m, enum psl_dtype dt, bool keys, bool lens)
{
	m->src_dev_type = PSL_DEV_CPU;
	m->src_dev_id = 0;
	m->dst_dev_type = PSL_DEV_CPU;
	m->dst_dev_id = 0;
	m->data_type_size = 0;
	if (keys) {
		m->data_type[m->data_type_size++] = PSL_WIRE_UINT64;
		m->data_type[m->data_type_size++] = (int)dt;
		if (lens)
			m->data_type[m->data_type_size++] = PSL_WIRE_INT32;
	}
}

void psl__kv_meta_dev(struct psl__meta *m, bool src, int mem, int dev)
{
	if (mem != PSL_MEM_CUDA)
		return;
	if (src) {
		m->src_dev_type = PSL_DEV_GPU;
		m->src_dev_id = dev;
	} else {
		m->dst_dev_type = PSL_DEV_GPU;
		m->dst_dev_id = dev;
	}
}

int psl__kv_stage(struct psl__kv_copy **cp, const void *src, int dev, size_t len, void *stream,
		  const void **out, void **done)
{
	void *buf;
	int rc;

	if (!*cp && !(*cp = psl__kv_copy_new(0, 1)))
		return -ENOMEM;
	if ((*cp)->stage)
		return -EBUSY; /* one staged buffer per block */
	buf = psl__cuda_stage_get(len, dev, &rc);
	if (!buf)
		return rc;
	rc = done ? psl__cuda_copy_out(buf, src, dev, len, stream, done)
		  : psl__cuda_copy_after(buf, PSL_MEM_HOST, -1, src, PSL_MEM_CUDA, dev, len,
					 stream);
	if (rc) {
		psl__cuda_stage_put(buf);
		return rc;
	}
	(*cp)->stage = buf;
	*out = buf;
	return 0;
}

int psl__kv_defer(struct psl_kv_worker *w, struct psl__cuda_after *a)
{
	atomic_fetch_add(&w->deferred, 1);
	if (psl__cuda_after(a) == 0)
		return 0;
	atomic_fetch_sub(&w->deferred, 1);
	return -EAGAIN;
}

void psl__kv_deferred_done(struct psl_kv_worker *w)
{
	atomic_fetch_sub(&w->deferred, 1);
}

struct psl_kv_meta psl__kv_meta_of(const struct psl__meta *m)
{
	return (struct psl_kv_meta){
		.cmd = m->head,
		.push = m->push,
		.pull = !m->push,
		.sender = m->sender,
		.timestamp = m->timestamp,
		.app_id = m->app_id,
		.customer_id = m->customer_id,
		.key = m->key,
		.addr = m->addr,
		.val_len = m->val_len,
		.option = m->option,
	};
}

void psl__kv_response_meta(struct psl__meta *m, const struct psl_kv_meta *req, int app_id,
			   int sid, int recver)
{
	psl__meta_init(m);
	m->head = req->cmd;
	m->app_id = app_id;
	m->customer_id = req->customer_id;
	m->timestamp = req->timestamp;
	m->request = false;
	m->push = req->push;
	m->key = req->key;
	m->addr = req->addr;
	m->val_len = req->val_len;
	m->option = req->option;
	m->sid = sid;
	m->recver = recver;
	/* the device fields stay UNK/-1 unless data frames are added
	 * (psl__kv_meta_data), as ps-lite writes them */
}

void psl__kv_error_meta(struct psl__meta *m, int err)
{
	m->option = err < 0 && err >= -4095 ? err : -EIO;
	/* a C++ ps-lite worker's RDMA and UCX vans make a pull answer's
	 * values from the meta: val_len bytes at addr, its own pull buffer as
	 * it is. With 0 its KVWorker finds no values for the key and fails its
	 * check instead of taking that buffer for the answer (docs/interop.md) */
	m->val_len = 0;
}

void psl__kv_request_meta(const struct psl_kv_worker *w, struct psl__meta *m, int cmd, int ts,
			  bool push, int id)
{
	psl__meta_init(m);
	m->head = cmd;
	m->app_id = w->c.app_id;
	m->customer_id = w->c.customer_id;
	m->timestamp = ts;
	m->request = true;
	m->push = push;
	m->recver = id;
	m->sid = 0;
}
