/*
 * A van built only for the loader tests. One source, many vans: the -D flags
 * in tests/Makefile.inc make it good or broken in one way each.
 *   TV_NAME            the name in its ops table (the file is van_<x>.so)
 *   TV_ABI_MAJOR       the ABI major its ops table claims (default: this one)
 *   TV_ENTRY_V2_ONLY   export psl_van_entry_v2 instead of psl_van_entry_v1
 *   TV_NO_ENTRY        export no entry symbol at all
 *   TV_NO_SEND         leave the mandatory send operation out
 *   TV_INIT_NODEV      init says "no device here" (-ENODEV)
 *   TV_OPS_SIZE        the size its ops table claims
 *   TV_NULL_OPS        the entry returns NULL
 * The good van binds nothing: bind returns the port it was asked for (or
 * what the parameter TESTVAN_BIND_RC says, as a negative errno).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pslite/van.h>

#ifndef TV_ABI_MAJOR
#define TV_ABI_MAJOR PSL_VAN_ABI_MAJOR
#endif
#ifndef TV_OPS_SIZE
#define TV_OPS_SIZE sizeof(struct psl_van_ops)
#endif

struct psl_van {
	const struct psl_van_host *host;
};

static int tv_init(const struct psl_van_host *host, struct psl_van **out)
{
	struct psl_van *v;
#ifdef TV_INIT_NODEV
	psl_van_log(host, PSL_VAN_LOG_INFO, TV_NAME, "no test device on this machine");
	(void)out;
	return -ENODEV;
#endif
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->host = host;
	*out = v;
	return 0;
}

static void tv_fini(struct psl_van *v)
{
	free(v);
}

static int tv_query(struct psl_van *v, struct psl_van_caps *caps)
{
	(void)v;
	caps->flags = PSL_VAN_CAP_MEM_HOST;
	caps->max_msg_size = 12345;
	strcpy(caps->transports, "test transport");
	return 0;
}

static int tv_bind(struct psl_van *v, const struct psl_van_bind_req *req,
		   struct psl_van_bind_res *res)
{
	const char *rc = v->host->param ? v->host->param(v->host->ctx, "TESTVAN_BIND_RC") : NULL;
	if (rc && *rc)
		return -atoi(rc);
	res->port = req->port ? req->port : 4242;
	res->addr_len = 0;
	return 0;
}

static int tv_connect(struct psl_van *v, const struct psl_van_peer *peer, int32_t my_id)
{
	(void)v;
	(void)peer;
	(void)my_id;
	return 0;
}

#ifndef TV_NO_SEND
static int tv_send(struct psl_van *v, int32_t node_id, const void *meta, size_t meta_len,
		   const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	(void)v;
	(void)node_id;
	(void)meta;
	(void)meta_len;
	(void)segs;
	(void)nseg;
	(void)cookie;
	return -EHOSTUNREACH;
}
#endif

static const struct psl_van_ops tv_ops = {
	.abi_version = PSL_VAN_ABI_MAKE(TV_ABI_MAJOR, 0),
	.size = TV_OPS_SIZE,
	.name = TV_NAME,
	.version = "testvan " TV_NAME " 1.0",
	.description = "a van for the loader tests",
	.init = tv_init,
	.fini = tv_fini,
	.query = tv_query,
	.bind = tv_bind,
	.connect = tv_connect,
#ifndef TV_NO_SEND
	.send = tv_send,
#endif
};

#if defined(TV_NO_ENTRY)
/* something exported, but no entry point */
PSL_VAN_EXPORT int testvan_not_an_entry(void);
int testvan_not_an_entry(void)
{
	return tv_ops.size > 0;
}
#elif defined(TV_ENTRY_V2_ONLY)
PSL_VAN_EXPORT const struct psl_van_ops *psl_van_entry_v2(uint32_t host_abi);
const struct psl_van_ops *psl_van_entry_v2(uint32_t host_abi)
{
	(void)host_abi;
	return &tv_ops;
}
#elif defined(TV_NULL_OPS)
PSL_VAN_EXPORT const struct psl_van_ops *PSL_VAN_ENTRY(uint32_t host_abi);
const struct psl_van_ops *PSL_VAN_ENTRY(uint32_t host_abi)
{
	(void)host_abi;
	return tv_ops.size ? NULL : &tv_ops;
}
#else
PSL_VAN_DEFINE_ENTRY(tv_ops)
#endif
