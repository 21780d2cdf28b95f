/* Message framing: ps-lite's meta layout (docs/wire.md section 4), bounds-checked. */
#ifndef PSL_CORE_MESSAGE_H
#define PSL_CORE_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "env.h"

#define PSL_EMPTY 32767 /* ps-lite's kEmpty */

#define PSL_RAW_META_SIZE 112
#define PSL_RAW_NODE_SIZE 552

enum psl_cmd {
	PSL_CMD_EMPTY = 0,
	PSL_CMD_TERMINATE = 1,
	PSL_CMD_ADD_NODE = 2,
	PSL_CMD_BARRIER = 3,
	PSL_CMD_ACK = 4,
	PSL_CMD_HEARTBEAT = 5,
	PSL_CMD_BOOTSTRAP = 6,
	PSL_CMD_ADDR_REQUEST = 7,
	PSL_CMD_ADDR_RESOLVED = 8,
	PSL_CMD_INSTANCE_BARRIER = 9,
	PSL_CMD_MAX = 9,
};

/* DataType numbers on the wire. */
enum {
	PSL_WIRE_CHAR = 0,
	PSL_WIRE_UINT64 = 8,
	PSL_WIRE_INT32 = 3,
	PSL_WIRE_OTHER = 11,
	PSL_WIRE_DTYPE_MAX = 14, /* pslite's PSL_FLOAT16, PSL_BFLOAT16, PSL_BOOL */
};
enum { PSL_DEV_UNK = 0, PSL_DEV_CPU = 1, PSL_DEV_GPU = 2 };

/* One entry of a node list (RawNode, decoded). */
struct psl__node {
	int role;
	int id;
	char hostname[PSL_HOST_MAX];
	int port;
	int first_port; /* ports[0] */
	bool is_recovery;
	int customer_id;
	int aux_id;
	uint32_t addr_len; /* endpoint_name_len */
	uint8_t addr[64];  /* endpoint_name */
	/* not on the wire: at the scheduler, the heartbeat interval (s) the
	 * node's registration promised, 0 for none (a C++ node; heartbeat.c) */
	int hb_interval;
	/* not on the wire: at the scheduler, its registration carried no
	 * pslite body: a C++ ps-lite node (recovery.c) */
	bool cxx;
};

#define PSL_MAX_DATA_TYPES 16

/* A decoded meta. Pointers (body) point into the frame it came from. */
struct psl__meta {
	int head;
	int app_id;
	int customer_id;
	int timestamp;
	bool request;
	bool push;
	bool simple_app;
	int src_dev_type, src_dev_id, dst_dev_type, dst_dev_id;
	int data_size;
	uint64_t key;
	uint64_t addr;
	int val_len;
	int option;
	int sid;
	const char *body;
	int body_size;
	int data_type_size;
	int32_t data_type[PSL_MAX_DATA_TYPES];
	/* control */
	int cmd;
	int barrier_group;
	uint64_t msg_sig;
	int node_size;
	struct psl__node *nodes; /* decode: malloc'ed, free with psl__meta_clear */
	/* not on the wire */
	int sender;
	int recver;
};

/* A meta with ps-lite's defaults for a control message. */
void psl__meta_init(struct psl__meta *m);
void psl__meta_clear(struct psl__meta *m);

/* Exact size of the encoded meta. */
size_t psl__meta_size(const struct psl__meta *m);
/* Encodes into buf (at least psl__meta_size bytes); returns the size. */
size_t psl__meta_encode(const struct psl__meta *m, void *buf);

/* Decodes and checks a received meta frame. On error returns -EBADMSG (or
 * -ENOMEM) and writes what was wrong into why. Never reads past len. */
int psl__meta_decode(const void *buf, size_t len, struct psl__meta *m, char *why,
		     size_t whylen);

/* ps-lite's resender signature of a message (docs/wire.md section 9). */
uint64_t psl__msg_sig(int app_id, int sender, int recver, int timestamp, bool request);

const char *psl__cmd_name(int cmd);

#endif
