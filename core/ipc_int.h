/* What ipc.c (start, stop, the receiver) and ipc_send.c (the sender's
 * rings) share: the layout of a chunk and its descriptor in a ring, and
 * each node's IPC state. Not part of any API. */
#ifndef PSL_CORE_IPC_INT_H
#define PSL_CORE_IPC_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc_files.h"
#include "postoffice.h"

#define IPC_DIR PSL__IPC_DIR
#define CHUNK_MAGIC 0x4b4e4843u /* "CHNK" */
#define DESC_MAGIC 0x43535049u	/* "IPSC" */
#define CHUNK_HDR 64
#define NAME_LEN 64
#define MAX_SEG 64

struct chunk_hdr {
	uint32_t state;
	uint32_t magic;
	uint64_t len;
};

struct desc {
	uint32_t magic, nseg;
	uint64_t chunk_off, ring_size;
	char name[NAME_LEN];
	struct {
		uint64_t off, len;
	} seg[];
};

/* this node's ring to one peer (sender side) */
struct ring {
	pthread_mutex_t mu;
	int state; /* 0 not yet looked at, 1 IPC, -1 the van */
	char name[NAME_LEN];
	uint8_t *base;
	size_t size;
	size_t head, tail, used; /* private: allocation in ring order */
	bool full_said;
	/* the peer was lost: the node that takes its place is looked at again
	 * (state -1 to 0) from this time on (CLOCK_MONOTONIC ms), until it
	 * takes IPC; 0: never */
	long long again_ms;
};

/* a ring of a lost peer's, kept mapped until stop (a send the van refuses
 * still frees its chunk there) */
struct retired {
	struct retired *next;
	uint8_t *base;
	size_t size;
};

/* a peer's ring, mapped here (receiver side) */
struct peer_map {
	char name[NAME_LEN];
	uint8_t *base;
	size_t size;
};

struct psl__ipc {
	pthread_mutex_t mu; /* rings[] and maps[] arrays, marker, retired */
	bool on;
	int nids;
	struct ring **rings;	 /* by peer id */
	struct peer_map *maps;	 /* by sender id */
	struct retired *retired;
	bool started;		 /* psl__ipc_start ran (until stop) */
	char marker[128];
	char job[17];
	char boot[64];
};
/* each node's (a joint process has two, a group's process one each) */
extern struct psl__ipc psl__ipcs[PSL__OFFICES];
/* the node o's (o: the office the function works for) */
#define IPC (psl__ipcs[o - psl__offices])

/* Whether process pid lives (on this machine). */
bool psl__ipc_pid_alive(long pid);
/* The marker of node id of o's job: IPC_DIR/pslite-ipcnode-JOB-ID. */
void psl__ipc_marker_name(struct psl__office *o, int id, char *out, size_t len);

/* Sender (ipc_send.c), IPC.mu held: the rings to lost peer id retired (the
 * node that takes its place is looked at again); all rings unmapped and
 * unlinked, at stop. */
void psl__ipc_rings_lost(struct psl__office *o, int id);
void psl__ipc_rings_free(struct psl__office *o);

#endif
