/* pslite-run: the shared-memory files its nodes left (shm_clean.c). */
#ifndef PSL_TOOLS_SHM_CLEAN_H
#define PSL_TOOLS_SHM_CLEAN_H

#include <sys/types.h>

/* Removes from /dev/shm the IPC rings (BYTEPS_ENABLE_IPC) that processes of
 * pids created and the markers they wrote, where those processes are gone:
 * a node that finalizes removes its own, a killed one cannot. Returns how
 * many files it removed. */
int psl_shm_clean(const pid_t *pids, int n);

#endif
