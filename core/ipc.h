/*
 * IPC between nodes of one host (BYTEPS_ENABLE_IPC=1, docs/ipc.md): the data
 * segments of a message to a local peer go through a shared-memory ring the
 * sender owns, and only a small descriptor crosses the van, whichever van it
 * is. The receiver hands the data up in place and frees the ring's chunk
 * when the message is released.
 */
#ifndef PSL_CORE_IPC_H
#define PSL_CORE_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pslite/van.h>

#include "message.h"

struct psl__office;

/* The meta body of a message whose segment 0 is an IPC descriptor. */
#define PSL__IPC_TAG "pslite-ipc1"

/* Once the node has its id: with BYTEPS_ENABLE_IPC=1, publishes that it
 * takes IPC (a marker in /dev/shm) and removes what killed processes left
 * there. Once per start: the first IPC message calls it if it comes first
 * (peers send to a node that took a lost one's place at once). */
void psl__ipc_start(struct psl__office *o);
/* After the van stopped: removes the marker and this node's rings, unmaps
 * the peers'. */
void psl__ipc_stop(struct psl__office *o);

/* Sender: when m (a data message of data bytes in segs) goes to a local
 * peer that takes IPC, copies the segments into this node's ring to it,
 * points m's body at the tag and writes the one segment to send instead
 * into *desc; returns 1. 0: send as usual. */
int psl__ipc_pack(struct psl__office *o, struct psl__meta *m, const struct psl_van_seg *segs,
		  uint32_t nseg, size_t data, struct psl_van_seg *desc);

/* The van refused the message psl__ipc_pack made: its chunk is free again. */
void psl__ipc_cancel(const struct psl_van_seg *desc_seg);

/* Receiver: when m carries the tag, returns a message whose segments are the
 * data in the sender's ring (released: the chunk freed, then raw), with m's
 * body cleared; a descriptor that does not hold gives a message without
 * segments (the request then fails as malformed) and a warning. Otherwise
 * returns raw. */
struct psl_van_rmsg *psl__ipc_unpack(struct psl__office *o, struct psl__meta *m,
				     struct psl_van_rmsg *raw);

/* A peer was lost: its ring (which it can no longer remove) is unlinked,
 * and this node's ring to it retired: the node that takes its place may
 * not take IPC (another machine, IPC off), and if it does it gets a new
 * ring once its marker is there (looked at again each second). */
void psl__ipc_peer_lost(struct psl__office *o, int id);

#endif
