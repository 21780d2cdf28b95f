/* pslite-check --restart-ok: sync rounds across a server's restart */
#pragma once

#include <stdbool.h>

#include "pslite-check.h"

/* The agreement keys, one per server: 0, or -ENOMEM. */
int restart_setup(void);
void restart_free(void);
/* Before round r's requests: moves each restarted server's keys on; 0, or
 * -1 when the check cannot go on (said with failf). */
int restart_round_start(long r);
/* Whether q's server is in use this round. */
bool restart_active(const struct part *q);
/* Waits for the requests of round r that were sent; a part whose server
 * was lost is marked skipped. Returns the failures that are no loss. */
int restart_wait_all(long r);
/* After the last round (done_rounds): fails if a server's keys never came
 * back, and says how many rounds were lost. */
void restart_finish(long last_round);
