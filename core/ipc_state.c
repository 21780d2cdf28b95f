/* Each node's IPC state (ipc_int.h) and what ipc.c and ipc_send.c both
 * need to know of a node's marker. */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "ipc_int.h"

struct psl__ipc psl__ipcs[PSL__OFFICES] = {
	[0 ... PSL__OFFICES - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER},
};

bool psl__ipc_pid_alive(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

void psl__ipc_marker_name(struct psl__office *o, int id, char *out, size_t len)
{
	char job[sizeof(IPC.job)];
	memcpy(job, IPC.job, sizeof(job)); /* (out may be IPC.marker) */
	snprintf(out, len, IPC_DIR "/pslite-ipcnode-%s-%d", job, id);
}
