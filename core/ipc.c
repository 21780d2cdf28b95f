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
 *
 * This file: start, stop, the receiver; the sender's rings: ipc_send.c.
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
#include "ipc_int.h"
#include "log.h"
#include "postoffice.h"
#include "van_host.h"

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
		if (pid <= 0 || psl__ipc_pid_alive(pid))
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
	if (IPC.started) { /* (a message came first: psl__ipc_unpack) */
		pthread_mutex_unlock(&IPC.mu);
		return;
	}
	IPC.started = true;
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
	psl__ipc_marker_name(o, o->my_id, IPC.marker, sizeof(IPC.marker));
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
	psl__ipc_rings_free(o);
	for (i = 0; IPC.maps && i < IPC.nids; i++)
		if (IPC.maps[i].base) {
			munmap(IPC.maps[i].base, IPC.maps[i].size);
			shm_unlink(IPC.maps[i].name); /* the sender may have died */
		}
	drop_arrays(o);
	IPC.started = false;
	pthread_mutex_unlock(&IPC.mu);
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
	if (!why && !IPC.started && o->cfg.ipc && o->my_id > 0) {
		/* a node that took a lost one's place: its peers send before
		 * its start is over */
		pthread_mutex_unlock(&IPC.mu);
		psl__ipc_start(o);
		pthread_mutex_lock(&IPC.mu);
	}
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
	psl__ipc_rings_lost(o, id);
	pthread_mutex_unlock(&IPC.mu);
}
