#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

/* RawMeta offsets (docs/wire.md 4.2). */
enum {
	M_HEAD = 0,
	M_BODY_SIZE = 4,
	M_CTRL = 8,
	M_REQUEST = 32,
	M_APP_ID = 36,
	M_TIMESTAMP = 40,
	M_DATA_TYPE_SIZE = 44,
	M_SRC_DEV_TYPE = 48,
	M_SRC_DEV_ID = 52,
	M_DST_DEV_TYPE = 56,
	M_DST_DEV_ID = 60,
	M_CUSTOMER_ID = 64,
	M_PUSH = 68,
	M_SIMPLE_APP = 69,
	M_DATA_SIZE = 72,
	M_KEY = 80,
	M_ADDR = 88,
	M_VAL_LEN = 96,
	M_OPTION = 100,
	M_SID = 104,
};
/* RawControl offsets, relative to M_CTRL (docs/wire.md 4.3). */
enum { C_CMD = 0, C_NODE_SIZE = 4, C_BARRIER_GROUP = 8, C_MSG_SIG = 16 };
/* RawNode offsets (docs/wire.md 4.4). */
enum {
	N_ROLE = 0,
	N_ID = 4,
	N_HOSTNAME = 8,
	N_NUM_PORTS = 72,
	N_PORTS = 76,
	N_PORT = 204,
	N_DEV_TYPES = 208,
	N_DEV_IDS = 336,
	N_IS_RECOVERY = 464,
	N_CUSTOMER_ID = 468,
	N_ENDPOINT_NAME = 472,
	N_ENDPOINT_NAME_LEN = 536,
	N_AUX_ID = 544,
};

static inline void put32(uint8_t *p, int32_t v)
{
	memcpy(p, &v, 4);
}
static inline void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}
static inline int32_t get32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}
static inline uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

void psl__meta_init(struct psl__meta *m)
{
	memset(m, 0, sizeof(*m));
	m->head = PSL_EMPTY;
	m->app_id = PSL_EMPTY;
	m->customer_id = PSL_EMPTY;
	m->timestamp = PSL_EMPTY;
	m->src_dev_id = -1;
	m->dst_dev_id = -1;
	m->sender = PSL_EMPTY;
	m->recver = PSL_EMPTY;
}

void psl__meta_clear(struct psl__meta *m)
{
	free(m->nodes);
	m->nodes = NULL;
	m->node_size = 0;
}

const char *psl__cmd_name(int cmd)
{
	static const char *const names[] = {
		"EMPTY",	"TERMINATE",	"ADD_NODE",	 "BARRIER",	  "ACK",
		"HEARTBEAT",	"BOOTSTRAP",	"ADDR_REQUEST", "ADDR_RESOLVED", "INSTANCE_BARRIER",
	};
	return cmd >= 0 && cmd <= PSL_CMD_MAX ? names[cmd] : "UNKNOWN";
}

size_t psl__meta_size(const struct psl__meta *m)
{
	size_t n = PSL_RAW_META_SIZE + (size_t)m->body_size + 4 * (size_t)m->data_type_size;
	if (m->cmd != PSL_CMD_EMPTY)
		n += PSL_RAW_NODE_SIZE * (size_t)m->node_size;
	return n;
}

static void encode_node(const struct psl__node *n, uint8_t *p)
{
	memset(p, 0, PSL_RAW_NODE_SIZE);
	put32(p + N_ROLE, n->role);
	put32(p + N_ID, n->id);
	memcpy(p + N_HOSTNAME, n->hostname, strnlen(n->hostname, PSL_HOST_MAX - 1));
	put32(p + N_NUM_PORTS, 1);
	put32(p + N_PORTS, n->first_port ? n->first_port : n->port);
	put32(p + N_PORT, n->port);
	if (n->role == 2) { /* the scheduler's entry carries CPU 0, as ps-lite's does */
		put32(p + N_DEV_TYPES, PSL_DEV_CPU);
		put32(p + N_DEV_IDS, 0);
	}
	p[N_IS_RECOVERY] = n->is_recovery ? 1 : 0;
	put32(p + N_CUSTOMER_ID, n->customer_id);
	if (n->addr_len) {
		memcpy(p + N_ENDPOINT_NAME, n->addr, n->addr_len > 64 ? 64 : n->addr_len);
	}
	put64(p + N_ENDPOINT_NAME_LEN, n->addr_len > 64 ? 64 : n->addr_len);
	put32(p + N_AUX_ID, n->aux_id);
}

size_t psl__meta_encode(const struct psl__meta *m, void *buf)
{
	uint8_t *p = buf;
	size_t off;
	int i;

	memset(p, 0, PSL_RAW_META_SIZE);
	put32(p + M_HEAD, m->head);
	put32(p + M_BODY_SIZE, m->body_size);
	put32(p + M_CTRL + C_CMD, m->cmd);
	if (m->cmd != PSL_CMD_EMPTY) {
		put32(p + M_CTRL + C_NODE_SIZE, m->node_size);
		if (m->cmd == PSL_CMD_BARRIER || m->cmd == PSL_CMD_INSTANCE_BARRIER)
			put32(p + M_CTRL + C_BARRIER_GROUP, m->barrier_group);
		if (m->cmd == PSL_CMD_ACK)
			put64(p + M_CTRL + C_MSG_SIG, m->msg_sig);
	}
	p[M_REQUEST] = m->request;
	put32(p + M_APP_ID, m->app_id);
	put32(p + M_TIMESTAMP, m->timestamp);
	put32(p + M_DATA_TYPE_SIZE, m->data_type_size);
	put32(p + M_SRC_DEV_TYPE, m->src_dev_type);
	put32(p + M_SRC_DEV_ID, m->src_dev_id);
	put32(p + M_DST_DEV_TYPE, m->dst_dev_type);
	put32(p + M_DST_DEV_ID, m->dst_dev_id);
	put32(p + M_CUSTOMER_ID, m->customer_id);
	p[M_PUSH] = m->push;
	p[M_SIMPLE_APP] = m->simple_app;
	put32(p + M_DATA_SIZE, m->data_size);
	put64(p + M_KEY, m->key);
	put64(p + M_ADDR, m->addr);
	put32(p + M_VAL_LEN, m->val_len);
	put32(p + M_OPTION, m->option);
	put32(p + M_SID, m->sid);
	off = PSL_RAW_META_SIZE;
	if (m->body_size > 0) {
		memcpy(p + off, m->body, (size_t)m->body_size);
		off += (size_t)m->body_size;
	}
	for (i = 0; i < m->data_type_size; i++, off += 4)
		put32(p + off, m->data_type[i]);
	if (m->cmd != PSL_CMD_EMPTY) {
		for (i = 0; i < m->node_size; i++, off += PSL_RAW_NODE_SIZE)
			encode_node(&m->nodes[i], p + off);
	}
	return off;
}

static int bad(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

static int check_bool(const uint8_t *p, const char *name, bool *out, char *why, size_t whylen)
{
	if (*p > 1)
		return bad(why, whylen, "field %s is %u, expected 0 or 1", name, *p);
	*out = *p;
	return 0;
}

static int valid_node_id(int id)
{
	return id == PSL_EMPTY || id == 1 || (id >= 8 && id < PSL_EMPTY);
}

static int decode_node(const uint8_t *p, struct psl__node *n, int idx, char *why, size_t whylen)
{
	uint64_t elen;
	int rc;

	memset(n, 0, sizeof(*n));
	n->role = get32(p + N_ROLE);
	n->id = get32(p + N_ID);
	if (n->role < 0 || n->role > 2)
		return bad(why, whylen, "node %d: role %d, expected 0, 1 or 2", idx, n->role);
	if (!valid_node_id(n->id))
		return bad(why, whylen, "node %d: id %d is out of range", idx, n->id);
	if (!memchr(p + N_HOSTNAME, 0, PSL_HOST_MAX))
		return bad(why, whylen, "node %d: hostname is not terminated within 64 bytes",
			   idx);
	memcpy(n->hostname, p + N_HOSTNAME, PSL_HOST_MAX);
	n->port = get32(p + N_PORT);
	n->first_port = get32(p + N_PORTS);
	if (n->port < 0 || n->port > 65535)
		return bad(why, whylen, "node %d: port %d is out of range", idx, n->port);
	if ((rc = check_bool(p + N_IS_RECOVERY, "is_recovery", &n->is_recovery, why, whylen)))
		return rc;
	n->customer_id = get32(p + N_CUSTOMER_ID);
	elen = get64(p + N_ENDPOINT_NAME_LEN);
	if (elen > 64)
		return bad(why, whylen, "node %d: endpoint_name_len %llu, expected at most 64",
			   idx, (unsigned long long)elen);
	n->addr_len = (uint32_t)elen;
	memcpy(n->addr, p + N_ENDPOINT_NAME, n->addr_len);
	n->aux_id = get32(p + N_AUX_ID);
	return 0;
}

int psl__meta_decode(const void *buf, size_t len, struct psl__meta *m, char *why, size_t whylen)
{
	const uint8_t *p = buf;
	uint64_t need;
	size_t off;
	int i, rc, node_size;

	psl__meta_init(m);
	if (len < PSL_RAW_META_SIZE)
		return bad(why, whylen, "meta is %zu bytes, expected at least %d", len,
			   PSL_RAW_META_SIZE);
	m->head = get32(p + M_HEAD);
	m->body_size = get32(p + M_BODY_SIZE);
	m->cmd = get32(p + M_CTRL + C_CMD);
	node_size = get32(p + M_CTRL + C_NODE_SIZE);
	m->barrier_group = get32(p + M_CTRL + C_BARRIER_GROUP);
	m->msg_sig = get64(p + M_CTRL + C_MSG_SIG);
	if ((rc = check_bool(p + M_REQUEST, "request", &m->request, why, whylen)))
		return rc;
	m->app_id = get32(p + M_APP_ID);
	m->timestamp = get32(p + M_TIMESTAMP);
	m->data_type_size = get32(p + M_DATA_TYPE_SIZE);
	m->src_dev_type = get32(p + M_SRC_DEV_TYPE);
	m->src_dev_id = get32(p + M_SRC_DEV_ID);
	m->dst_dev_type = get32(p + M_DST_DEV_TYPE);
	m->dst_dev_id = get32(p + M_DST_DEV_ID);
	m->customer_id = get32(p + M_CUSTOMER_ID);
	if ((rc = check_bool(p + M_PUSH, "push", &m->push, why, whylen)))
		return rc;
	if ((rc = check_bool(p + M_SIMPLE_APP, "simple_app", &m->simple_app, why, whylen)))
		return rc;
	m->data_size = get32(p + M_DATA_SIZE);
	m->key = get64(p + M_KEY);
	m->addr = get64(p + M_ADDR);
	m->val_len = get32(p + M_VAL_LEN);
	m->option = get32(p + M_OPTION);
	m->sid = get32(p + M_SID);

	if (m->cmd < 0 || m->cmd > PSL_CMD_MAX)
		return bad(why, whylen, "unknown command %d", m->cmd);
	if (m->body_size < 0)
		return bad(why, whylen, "body_size %d is negative", m->body_size);
	if (m->data_type_size < 0 || m->data_type_size > PSL_MAX_DATA_TYPES)
		return bad(why, whylen, "data_type_size %d, expected 0 to %d", m->data_type_size,
			   PSL_MAX_DATA_TYPES);
	if (node_size < 0)
		return bad(why, whylen, "node_size %d is negative", node_size);
	if (m->cmd == PSL_CMD_EMPTY)
		node_size = 0; /* ps-lite writes nodes only for control messages */
	need = (uint64_t)PSL_RAW_META_SIZE + (uint64_t)m->body_size +
	       4 * (uint64_t)m->data_type_size + (uint64_t)PSL_RAW_NODE_SIZE * (uint64_t)node_size;
	if (need != len)
		return bad(why, whylen,
			   "meta is %zu bytes but its counts (body %d, data types %d, nodes %d) "
			   "say %llu",
			   len, m->body_size, m->data_type_size, node_size,
			   (unsigned long long)need);
	if (m->src_dev_type < 0 || m->src_dev_type > 2 || m->dst_dev_type < 0 ||
	    m->dst_dev_type > 2)
		return bad(why, whylen, "device type %d/%d, expected 0 to 2", m->src_dev_type,
			   m->dst_dev_type);
	if (m->data_size < 0)
		return bad(why, whylen, "data_size %d is negative", m->data_size);

	off = PSL_RAW_META_SIZE;
	m->body = m->body_size ? (const char *)p + off : NULL;
	off += (size_t)m->body_size;
	for (i = 0; i < m->data_type_size; i++, off += 4) {
		m->data_type[i] = get32(p + off);
		if (m->data_type[i] < 0 || m->data_type[i] > PSL_WIRE_DTYPE_MAX)
			return bad(why, whylen, "data type %d is %d, expected 0 to %d", i,
				   m->data_type[i], PSL_WIRE_DTYPE_MAX);
	}
	if (node_size) {
		m->nodes = calloc((size_t)node_size, sizeof(*m->nodes));
		if (!m->nodes)
			return -ENOMEM;
		m->node_size = node_size;
		for (i = 0; i < node_size; i++, off += PSL_RAW_NODE_SIZE) {
			if ((rc = decode_node(p + off, &m->nodes[i], i, why, whylen))) {
				psl__meta_clear(m);
				return rc;
			}
		}
	}
	return 0;
}

uint64_t psl__msg_sig(int app_id, int sender, int recver, int timestamp, bool request)
{
	/* 32-bit signed (ts << 1 | request), widened with sign extension, as C++ does */
	int32_t low = (int32_t)(((uint32_t)timestamp << 1) | (request ? 1u : 0u));
	uint64_t sig = (uint64_t)(int64_t)low;
	sig |= ((uint64_t)(uint16_t)app_id) << 48;
	sig |= ((uint64_t)(uint8_t)sender) << 40;
	sig |= ((uint64_t)(uint8_t)recver) << 32;
	return sig;
}
