/*
 * IPC between nodes of one host, the sender's side (ipc.c has the layout):
 * one ring per local peer that takes IPC, chunks allocated in ring order
 * and reclaimed from the oldest once the receiver freed them.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ipc.h"
#include "ipc_int.h"
#include "log.h"
#include "postoffice.h"
#include "van_host.h"

static long long mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Whether peer id runs on this machine with IPC on (its marker). */
static bool peer_local(struct psl__office *o, int id)
{
	char path[128], buf[128], boot[64] = "";
	long pid = 0;
	FILE *f;
	psl__ipc_marker_name(o, id, path, sizeof(path));
	if (!(f = fopen(path, "r")))
		return false;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld %63s", &pid, boot) != 2)
		pid = 0;
	fclose(f);
	return psl__ipc_pid_alive(pid) && !strcmp(boot, IPC.boot);
}

/* Creates the ring to peer id (r->mu held). */
static void ring_open(struct psl__office *o, struct ring *r, int id)
{
	size_t size = (size_t)o->cfg.ipc_buf_mb << 20;
	int fd, e;
	snprintf(r->name, sizeof(r->name), "/pslite-ipc-%ld-%d-%d", (long)getpid(), o->my_id, id);
	fd = shm_open(r->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		e = errno;
		goto fail;
	}
	e = posix_fallocate(fd, 0, (off_t)size);
	if (e) {
		close(fd);
		shm_unlink(r->name);
		goto fail;
	}
	r->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	e = errno;
	close(fd);
	if (r->base == MAP_FAILED) {
		r->base = NULL;
		shm_unlink(r->name);
		goto fail;
	}
	r->size = size;
	r->state = 1;
	{
		char who[128];
		PSL_INFO("IPC: data to %s goes through shared memory (ring %s, %zu MiB)",
			 psl__node_desc(o, id, who, sizeof(who)), r->name, size >> 20);
	}
	return;
fail:
	r->state = -1;
	PSL_WARN("BYTEPS_ENABLE_IPC=1: cannot make a %d MiB shared-memory ring for node %d in "
		 IPC_DIR " (%s): data to it goes through the van (free space in " IPC_DIR
		 ", or lower PS_IPC_BUF_MB)",
		 o->cfg.ipc_buf_mb, id, strerror(e));
}

static struct chunk_hdr *chunk_at(struct ring *r, size_t off)
{
	return (struct chunk_hdr *)(r->base + off);
}

/* Frees the oldest chunks the receiver is done with (r->mu held). */
static void reclaim(struct ring *r)
{
	while (r->used) {
		struct chunk_hdr *c = chunk_at(r, r->tail);
		if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE))
			break;
		r->used -= c->len;
		r->tail = (r->tail + c->len) % r->size;
	}
	if (!r->used)
		r->head = r->tail = 0;
}

/* A chunk of need bytes in ring order, or (size_t)-1 (r->mu held). The live
 * chunks are [tail, head) around the ring; used counts their bytes, so that
 * head == tail means empty (used 0) or full. */
static size_t ring_alloc(struct ring *r, size_t need)
{
	size_t off;
	reclaim(r);
	if (need > r->size)
		return (size_t)-1;
	if (r->used == 0) {
		off = 0;
	} else if (r->head > r->tail) {
		if (r->size - r->head >= need) {
			off = r->head;
		} else if (r->tail >= need) {
			/* the end of the ring is skipped: a pad chunk, free already */
			struct chunk_hdr *pad = chunk_at(r, r->head);
			pad->magic = CHUNK_MAGIC;
			pad->len = r->size - r->head;
			__atomic_store_n(&pad->state, 0, __ATOMIC_RELEASE);
			r->used += pad->len;
			off = 0;
		} else {
			return (size_t)-1;
		}
	} else if (r->head < r->tail && r->tail - r->head >= need) {
		off = r->head;
	} else {
		return (size_t)-1; /* full */
	}
	r->head = (off + need) % r->size;
	r->used += need;
	return off;
}

int psl__ipc_pack(struct psl__office *o, struct psl__meta *m, const struct psl_van_seg *segs,
		  uint32_t nseg, size_t data, struct psl_van_seg *desc_seg)
{
	struct ring *r;
	struct chunk_hdr *c;
	struct desc *d;
	size_t dlen, need, off, pos;
	uint32_t i;
	int id = m->recver;

	if (!IPC.on || m->cmd != PSL_CMD_EMPTY || m->simple_app || m->body_size || !nseg ||
	    nseg > MAX_SEG || data < (size_t)o->cfg.ipc_min_bytes || id == o->my_id || id < 1 ||
	    id >= IPC.nids)
		return 0;
	for (i = 0; i < nseg; i++)
		if (segs[i].mem_type != PSL_MEM_HOST)
			return 0;
	pthread_mutex_lock(&IPC.mu);
	if (!IPC.rings) {
		pthread_mutex_unlock(&IPC.mu);
		return 0;
	}
	r = IPC.rings[id];
	if (!r && (r = calloc(1, sizeof(*r)))) {
		pthread_mutex_init(&r->mu, NULL);
		IPC.rings[id] = r;
	}
	pthread_mutex_unlock(&IPC.mu);
	if (!r)
		return 0;
	pthread_mutex_lock(&r->mu);
	if (r->state == -1 && r->again_ms && mono_ms() >= r->again_ms)
		r->state = 0; /* (a lost peer's successor: its marker may be there now) */
	if (r->state == 0) {
		if (peer_local(o, id))
			ring_open(o, r, id);
		else
			r->state = -1;
		if (r->again_ms)
			r->again_ms = r->state == 1 ? 0 : mono_ms() + 1000;
	}
	if (r->state != 1) {
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	dlen = (sizeof(*d) + nseg * sizeof(d->seg[0]) + 63) & ~(size_t)63;
	need = CHUNK_HDR + dlen;
	for (i = 0; i < nseg; i++)
		need += (segs[i].len + 63) & ~(size_t)63;
	off = ring_alloc(r, need);
	if (off == (size_t)-1) {
		if (!r->full_said)
			PSL_INFO("IPC to node %d: its %d MiB ring is full (a %zu-byte message, %zu "
				 "bytes in use): such messages go through the van (PS_IPC_BUF_MB)",
				 id, o->cfg.ipc_buf_mb, need, r->used);
		r->full_said = true;
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	c = chunk_at(r, off);
	c->magic = CHUNK_MAGIC;
	c->len = need;
	d = (struct desc *)(r->base + off + CHUNK_HDR);
	d->magic = DESC_MAGIC;
	d->nseg = nseg;
	d->chunk_off = off;
	d->ring_size = r->size;
	memset(d->name, 0, sizeof(d->name));
	snprintf(d->name, sizeof(d->name), "%s", r->name);
	pos = off + CHUNK_HDR + dlen;
	for (i = 0; i < nseg; i++) {
		d->seg[i].off = pos;
		d->seg[i].len = segs[i].len;
		if (segs[i].len)
			memcpy(r->base + pos, segs[i].data, segs[i].len);
		pos += (segs[i].len + 63) & ~(size_t)63;
	}
	__atomic_store_n(&c->state, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&r->mu);
	*desc_seg = (struct psl_van_seg){d, sizeof(*d) + nseg * sizeof(d->seg[0]), PSL_MEM_HOST,
					 -1, NULL};
	m->body = PSL__IPC_TAG;
	m->body_size = (int)strlen(PSL__IPC_TAG);
	return 1;
}

void psl__ipc_cancel(const struct psl_van_seg *desc_seg)
{
	struct chunk_hdr *c = (struct chunk_hdr *)((uint8_t *)desc_seg->data - CHUNK_HDR);
	__atomic_store_n(&c->state, 0, __ATOMIC_RELEASE); /* reclaimed by the next pack */
}

/* This node's ring to lost peer id is retired (r->mu held): the node that
 * takes its place may not take IPC (another machine, IPC off), and if it
 * does it gets a new ring; the old mapping stays until stop. */
static void ring_retire(struct psl__office *o, struct ring *r)
{
	struct retired *t;
	if (r->state == 1 && (t = malloc(sizeof(*t)))) {
		shm_unlink(r->name);
		*t = (struct retired){IPC.retired, r->base, r->size};
		IPC.retired = t;
		r->base = NULL;
		r->size = r->head = r->tail = r->used = 0;
		r->full_said = false;
		r->state = 0;
	} else if (r->state == -1) {
		r->state = 0;
	}
	/* (out of memory: the ring stays, and so do IPC messages to id) */
	r->again_ms = r->state == 0 ? 1 : 0;
}

void psl__ipc_rings_lost(struct psl__office *o, int id)
{
	if (!IPC.rings || id < 1 || id >= IPC.nids || !IPC.rings[id])
		return;
	pthread_mutex_lock(&IPC.rings[id]->mu);
	ring_retire(o, IPC.rings[id]);
	pthread_mutex_unlock(&IPC.rings[id]->mu);
}

void psl__ipc_rings_free(struct psl__office *o)
{
	int i;
	for (i = 0; IPC.rings && i < IPC.nids; i++) {
		struct ring *r = IPC.rings[i];
		if (!r)
			continue;
		if (r->base) {
			munmap(r->base, r->size);
			shm_unlink(r->name);
		}
		pthread_mutex_destroy(&r->mu);
		free(r);
	}
	while (IPC.retired) {
		struct retired *t = IPC.retired;
		IPC.retired = t->next;
		munmap(t->base, t->size);
		free(t);
	}
}
