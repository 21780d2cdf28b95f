/* psl_barrier: the public barrier call, and a barrier of every node of
 * this process (a joint process's two, a whole instance group); the
 * messages and the scheduler's count are barrier.c's. */
#include "config.h"

#include <errno.h>

#include "control.h"
#include "log.h"
#include "postoffice.h"

int psl__barrier_here(int customer_id, int group, int cmd)
{
	struct psl__office *home = psl__cur, *o;
	unsigned gen[PSL__OFFICES];
	int rc = 0, i, n = psl__nodes_here();
	bool in[PSL__OFFICES] = {false};

	for (i = 0; i < n && !rc; i++) {
		o = &psl__offices[i];
		psl__enter(o); /* (its log lines name it) */
		if (!psl__group_has(o, group, o->my_id) && n > 1)
			continue;
		rc = psl__control_barrier_arrive(o, customer_id, group, cmd, &gen[i]);
		in[i] = rc == 0;
		if (rc == 1)
			rc = 0;
	}
	/* (a node that could not arrive: the other's barrier cannot end) */
	for (i = 0; i < n && !rc; i++) {
		if (!in[i])
			continue;
		o = &psl__offices[i];
		psl__enter(o);
		rc = psl__control_barrier_wait(o, group, gen[i]);
	}
	psl__enter(home);
	return rc;
}

/* Whether this process runs its whole instance group of one role
 * (psl_start_group with DMLC_GROUP_SIZE > 1, not joint). */
static bool whole_group_here(void)
{
	return psl_group_size() > 1 && !psl__joint() && psl__nodes_here() == psl_group_size();
}

/* C++ ps-lite's Postoffice::Barrier in a process of a whole group: one
 * BARRIER from the first instance stands for all of them (and for all the
 * process's threads that ask at the same time). */
static int barrier_first(int customer_id, int group)
{
	struct psl__office *home = psl__cur, *o = &psl__offices[0];
	unsigned gen;
	int rc;
	psl__enter(o); /* (its log lines name it) */
	rc = psl__control_barrier_shared(o, customer_id, group, &gen);
	if (rc == 0)
		rc = psl__control_barrier_wait(o, group, gen);
	psl__enter(home);
	return rc == 1 ? 0 : rc;
}

int psl_barrier(int customer_id, int group)
{
	psl__clear_error();
	if (psl__offices[0].state != PSL__READY)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_barrier: pslite is not started on "
				"this node (or is finalizing): call it between psl_start and "
				"psl_finalize");
	if (group < 1 || group > 7)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_barrier: group %d is no node group: "
				"pass 1 to 7 (PSL_GROUP_SCHEDULER, _SERVERS, _WORKERS or their "
				"sum)", group);
	/* a process that holds its whole instance group asks once, from its
	 * first instance, as C++ ps-lite's processes do (a group-level
	 * BARRIER); a process of one instance of a group asks for itself
	 * (StepMesh's model: an INSTANCE_BARRIER); the scheduler counts both
	 * kinds in one barrier (barrier.c) */
	if (whole_group_here())
		return psl__ret("psl_barrier", barrier_first(customer_id, group));
	return psl__ret("psl_barrier",
			psl__barrier_here(customer_id, group,
				     psl_group_size() > 1 ? PSL_CMD_INSTANCE_BARRIER
							  : PSL_CMD_BARRIER));
}
