/*
 * IPC between nodes of one host (see ipc.h, docs/ipc.md).
 *
 * A node with BYTEPS_ENABLE_IPC=1 publishes, once it has its id, a marker
 * /dev/shm/pslite-ipcnode-<job>-<id> holding its pid and the kernel's boot
 * id (<job>: a hash of the scheduler's address). A sender takes the IPC way
 * to a peer only when it has IPC on itself and finds that peer's marker with
 * the same boot id and a live pid: then both share this machine's /dev/shm.
 *
 * The sender owns one ring per such peer, /dev/shm/pslite-ipc-<pid>-<id>-<peer>,
 * reserved whole with posix_fallocate (a full /dev/shm is then found at once,
 * never as a SIGBUS later). A message's segments are copied into one chunk:
 *
 *   chunk   u32 state (1 in use, 0 freed by the receiver), u32 magic, u64 len,
 *           then the descriptor, then the segments' bytes (64-byte aligned)
 *   desc    u32 magic, u32 nseg, u64 chunk offset, u64 ring size,
 *           char ring name[64], then nseg times u64 offset, u64 len
 *
 * The message crosses the van with the descriptor as its only segment and
 * the meta body PSL__IPC_TAG. The receiver maps the ring (once), hands the
 * segments up in place, and stores 0 into the chunk's state when the message
 * is released. The sender allocates chunks in ring order and reclaims freed
 * ones from the oldest; when the ring has no room (or the peer is not local,
 * or the message is small: PS_IPC_MIN_BYTES) the message goes by the van as
 * usual, so IPC never fails a request that the van could carry.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc.h"
#include "ipc_files.h"
#include "log.h"
#include "postoffice.h"
#include "van_host.h"

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
};

/* a peer's ring, mapped here (receiver side) */
struct peer_map {
	char name[NAME_LEN];
	uint8_t *base;
	size_t size;
};

static struct {
	pthread_mutex_t mu; /* rings[] and maps[] arrays, marker */
	bool on;
	int nids;
	struct ring **rings;	 /* by peer id */
	struct peer_map *maps;	 /* by sender id */
	char marker[128];
	char job[17];
	char boot[64];
} ipcs[PSL__OFFICES] = {
	[0 ... PSL__OFFICES - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER},
}; /* each node's (a joint process has two, a group's process one each) */
/* the node o's (o: the office the function works for) */
#define IPC (ipcs[o - psl__offices])

struct ipc_rmsg {
	struct psl_van_rmsg pub;
	struct psl_van_rmsg *orig;
	uint32_t *state;
	struct psl_van_rseg segs[];
};

static void read_boot_id(char *out, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	out[0] = 0;
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = 0;
		fclose(f);
	}
}

static bool pid_alive(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Removes what processes of this machine that are gone left in /dev/shm:
 * their rings and markers. */
static void sweep(void)
{
	DIR *d = opendir(IPC_DIR);
	struct dirent *e;
	int n = 0;
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[512];
		long pid = psl__ipc_file_pid(e->d_name);
		if (pid <= 0 || pid_alive(pid))
			continue;
		snprintf(path, sizeof(path), IPC_DIR "/%s", e->d_name);
		if (unlink(path) == 0)
			n++;
	}
	closedir(d);
	if (n)
		PSL_INFO("IPC: removed %d shared-memory files that ended processes left in " IPC_DIR,
			 n);
}

static void marker_name(struct psl__office *o, int id, char *out, size_t len)
{
	char job[sizeof(IPC.job)];
	memcpy(job, IPC.job, sizeof(job)); /* (out may be IPC.marker) */
	snprintf(out, len, IPC_DIR "/pslite-ipcnode-%s-%d", job, id);
}

/* Frees the ring and map arrays and turns IPC off (IPC.mu held). */
static void drop_arrays(struct psl__office *o)
{
	free(IPC.rings);
	free(IPC.maps);
	IPC.rings = NULL;
	IPC.maps = NULL;
	IPC.on = false;
}

void psl__ipc_start(struct psl__office *o)
{
	char tmp[160];
	uint64_t h = 1469598103934665603ull;
	const char *p;
	FILE *f;

	pthread_mutex_lock(&IPC.mu);
	for (p = o->cfg.root_uri; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	h = (h ^ (uint64_t)o->cfg.root_port) * 1099511628211ull;
	snprintf(IPC.job, sizeof(IPC.job), "%016" PRIx64, h);
	read_boot_id(IPC.boot, sizeof(IPC.boot));
	IPC.on = o->cfg.ipc && !o->cfg.resend && IPC.boot[0];
	IPC.nids = o->max_id + 1;
	if (!IPC.on) {
		if (o->cfg.ipc && o->cfg.resend)
			PSL_WARN("BYTEPS_ENABLE_IPC=1 and PS_RESEND=1: IPC is off (a resent message "
				 "cannot point into a ring whose chunk was freed); data goes "
				 "through the van");
		pthread_mutex_unlock(&IPC.mu);
		return;
	}
	IPC.rings = calloc((size_t)IPC.nids, sizeof(*IPC.rings));
	IPC.maps = calloc((size_t)IPC.nids, sizeof(*IPC.maps));
	if (!IPC.rings || !IPC.maps) {
		drop_arrays(o);
		pthread_mutex_unlock(&IPC.mu);
		PSL_WARN("BYTEPS_ENABLE_IPC=1: out of memory; data goes through the van");
		return;
	}
	sweep();
	marker_name(o, o->my_id, IPC.marker, sizeof(IPC.marker));
	snprintf(tmp, sizeof(tmp), "%s.%d", IPC.marker, (int)getpid());
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%ld %s\n", (long)getpid(), IPC.boot) < 0 || fclose(f) != 0 ||
	    rename(tmp, IPC.marker) != 0) {
		int e = errno;
		if (f)
			unlink(tmp);
		PSL_WARN("BYTEPS_ENABLE_IPC=1: cannot write %s (%s): local peers will send to this "
			 "node through the van (is " IPC_DIR " writable?)",
			 IPC.marker, strerror(e));
		IPC.marker[0] = 0;
	}
	pthread_mutex_unlock(&IPC.mu);
	PSL_INFO("BYTEPS_ENABLE_IPC=1: data of %d bytes or more to a node on this machine that "
		 "has it on too goes through shared memory (a %d MiB ring per peer in " IPC_DIR
		 "); each peer is named when its first message takes it",
		 o->cfg.ipc_min_bytes, o->cfg.ipc_buf_mb);
	PSL_DBG("IPC on: marker %s", IPC.marker);
}

void psl__ipc_stop(struct psl__office *o)
{
	int i;
	pthread_mutex_lock(&IPC.mu);
	if (IPC.marker[0])
		unlink(IPC.marker);
	IPC.marker[0] = 0;
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
	for (i = 0; IPC.maps && i < IPC.nids; i++)
		if (IPC.maps[i].base) {
			munmap(IPC.maps[i].base, IPC.maps[i].size);
			shm_unlink(IPC.maps[i].name); /* the sender may have died */
		}
	drop_arrays(o);
	pthread_mutex_unlock(&IPC.mu);
}

/* ------------------------------------------------------------- sender -- */

/* Whether peer id runs on this machine with IPC on (its marker). */
static bool peer_local(struct psl__office *o, int id)
{
	char path[128], buf[128], boot[64] = "";
	long pid = 0;
	FILE *f;
	marker_name(o, id, path, sizeof(path));
	if (!(f = fopen(path, "r")))
		return false;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld %63s", &pid, boot) != 2)
		pid = 0;
	fclose(f);
	return pid_alive(pid) && !strcmp(boot, IPC.boot);
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
	if (r->state == 0) {
		if (peer_local(o, id))
			ring_open(o, r, id);
		else
			r->state = -1;
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

/* ----------------------------------------------------------- receiver -- */

static void ipc_release(struct psl_van_rmsg *msg)
{
	struct ipc_rmsg *w = (struct ipc_rmsg *)msg;
	if (w->state)
		__atomic_store_n(w->state, 0, __ATOMIC_RELEASE);
	psl__raw_release(w->orig);
	free(w);
}

static bool name_ok(const char *n)
{
	size_t i;
	if (strncmp(n, "/pslite-ipc-", 12) != 0)
		return false;
	for (i = 1; n[i]; i++)
		if (!((n[i] >= '0' && n[i] <= '9') || n[i] == '-' || (n[i] >= 'a' && n[i] <= 'z')))
			return false;
	return i < NAME_LEN;
}

/* The mapping of the sender's ring the descriptor names (IPC.mu held). */
static struct peer_map *peer_ring(struct psl__office *o, int sender, const struct desc *d,
				  const char **why)
{
	struct peer_map *p;
	struct stat st;
	int fd;
	if (!IPC.maps || sender < 1 || sender >= IPC.nids) {
		*why = "IPC is off on this node, or the sender is no node of the job";
		return NULL;
	}
	p = &IPC.maps[sender];
	if (p->base && !strncmp(p->name, d->name, NAME_LEN) && p->size == d->ring_size)
		return p;
	if (!name_ok(d->name)) {
		*why = "it names no pslite ring";
		return NULL;
	}
	fd = shm_open(d->name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) {
		*why = "its ring cannot be opened";
		return NULL;
	}
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != d->ring_size || !st.st_size) {
		close(fd);
		*why = "its ring's size is not the one it says";
		return NULL;
	}
	if (p->base)
		munmap(p->base, p->size);
	p->base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		*why = "its ring cannot be mapped";
		return NULL;
	}
	p->size = (size_t)st.st_size;
	memcpy(p->name, d->name, NAME_LEN);
	p->name[NAME_LEN - 1] = 0;
	return p;
}

struct psl_van_rmsg *psl__ipc_unpack(struct psl__office *o, struct psl__meta *m,
				     struct psl_van_rmsg *raw)
{
	/* the descriptor, copied out: a van's frame may start anywhere */
	uint64_t dbuf[(sizeof(struct desc) + MAX_SEG * 2 * sizeof(uint64_t)) / 8 + 1];
	const struct desc *d = (const struct desc *)(void *)dbuf;
	const char *why = NULL;
	struct peer_map *p = NULL;
	struct ipc_rmsg *w;
	uint32_t i, nseg = 0;
	char nd[96];

	if (m->body_size != (int)strlen(PSL__IPC_TAG) || memcmp(m->body, PSL__IPC_TAG,
								  strlen(PSL__IPC_TAG)) != 0)
		return raw;
	m->body = NULL;
	m->body_size = 0;
	if (raw->nseg != 1 || raw->segs[0].len < sizeof(*d) || raw->segs[0].len > sizeof(dbuf))
		why = "its descriptor is malformed";
	else
		memcpy(dbuf, raw->segs[0].data, raw->segs[0].len);
	if (!why && (d->magic != DESC_MAGIC || d->nseg == 0 || d->nseg > MAX_SEG ||
		     raw->segs[0].len != sizeof(*d) + d->nseg * sizeof(d->seg[0])))
		why = "its descriptor is malformed";
	w = calloc(1, sizeof(*w) + MAX_SEG * sizeof(w->segs[0]));
	if (!w) {
		PSL_WARN("dropped an IPC message from node %d: out of memory", raw->sender);
		/* the request it belongs to times out, or fails with its node */
		psl__raw_release(raw);
		return NULL;
	}
	pthread_mutex_lock(&IPC.mu);
	if (!why)
		p = peer_ring(o, raw->sender, d, &why);
	if (p && (d->chunk_off >= p->size || p->size - d->chunk_off < CHUNK_HDR))
		why = "its chunk lies outside the ring";
	if (p && !why) {
		const struct chunk_hdr *c = (const struct chunk_hdr *)(p->base + d->chunk_off);
		uint64_t end = d->chunk_off + c->len;
		if (c->magic != CHUNK_MAGIC || c->len > p->size - d->chunk_off)
			why = "its chunk header is not one";
		for (i = 0; !why && i < d->nseg; i++)
			if (d->seg[i].off < d->chunk_off + CHUNK_HDR || d->seg[i].off > end ||
			    d->seg[i].len > end - d->seg[i].off)
				why = "a segment lies outside its chunk";
		if (!why) {
			for (i = 0; i < d->nseg; i++)
				w->segs[i] = (struct psl_van_rseg){p->base + d->seg[i].off,
								   d->seg[i].len, PSL_MEM_HOST, -1};
			nseg = d->nseg;
			w->state = (uint32_t *)(p->base + d->chunk_off);
		}
	}
	pthread_mutex_unlock(&IPC.mu);
	if (why)
		PSL_WARN("an IPC message from %s cannot be read (%s): it is handed on without data, "
			 "so that its request fails",
			 psl__node_desc(o, raw->sender, nd, sizeof(nd)), why);
	w->orig = raw;
	w->pub.sender = raw->sender;
	w->pub.meta = raw->meta;
	w->pub.meta_len = raw->meta_len;
	w->pub.nseg = nseg;
	w->pub.segs = w->segs;
	w->pub.release = ipc_release;
	return &w->pub;
}

void psl__ipc_peer_lost(struct psl__office *o, int id)
{
	pthread_mutex_lock(&IPC.mu);
	if (IPC.maps && id > 0 && id < IPC.nids && IPC.maps[id].base)
		shm_unlink(IPC.maps[id].name); /* the mapping stays until stop */
	pthread_mutex_unlock(&IPC.mu);
}
