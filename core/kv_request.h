/* A KV server's request as its handler sees it (kv_server.c takes it in)
 * and what answering it needs (kv_respond.c). */
#ifndef PSL_CORE_KV_REQUEST_H
#define PSL_CORE_KV_REQUEST_H

#include <stdatomic.h>

#include "kv.h"
#include "kv_tensor.h"
#include "pslite.h"

struct psl__office;
struct psl_van_rmsg;

/* A request as the handler sees it, with what answering it needs. */
struct kv_req {
	struct psl_kv_request pub;
	struct psl_van_rmsg *raw;
	void *aligned; /* copies of frames that were not aligned */
	int app_id;
	enum psl_dtype dt;
	size_t esz;
	int sid;
	int reply_to; /* the sender's id (pub.meta.sender names its group) */
	struct psl__office *office; /* the server node it came to */
	atomic_int refs; /* 1, plus one per psl_kv_request_hold */
	void *stream; /* the server's CUDA stream when it came */
	struct psl__tdesc in;	/* what the meta said of the values */
	struct psl_kv_tensor out; /* dtype and shape its answer says (batches) */
};

/* A zeroed record (from a process-wide cache), or NULL; and its release
 * once the last hold on it is gone (frees its received message). */
struct kv_req *psl__kv_req_new(void);
void psl__kv_req_free(struct kv_req *q);

#endif
