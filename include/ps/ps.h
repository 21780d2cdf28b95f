/*
 * ps-lite's C++ API on pslite: #include <ps/ps.h>, link -lpslite
 * (pkg-config --cflags --libs pslite). Header-only C++14 over pslite's C
 * API (pslite.h). docs/coming-from-ps-lite.md says what differs from C++
 * ps-lite, above all: a DMLC_GROUP_SIZE group runs in one process (ps-lite's
 * model) unless PS_GROUP_IN_PROCESS=0, STEPMESH_GPU or DMLC_NODE_RANK make
 * the process one instance of it (StepMesh's model, pslite-run's); Barrier is
 * passed once per process.
 */
#ifndef PS_PS_H_
#define PS_PS_H_

#include <pslite.h>

#include <functional>
#include <string>

#include "ps/base.h"
#include "ps/kv_app.h"
#include "ps/simple_app.h"

namespace ps {

inline int NumWorkers() { return Postoffice::Get()->num_workers(); }
inline int NumServers() { return Postoffice::Get()->num_servers(); }
inline bool IsWorker() { return psl_is_worker(); }
inline bool IsServer() { return psl_is_server(); }
inline bool IsScheduler() { return psl_is_scheduler(); }
/* the rank of this node's group among its role's (ps-lite's MyRank) */
inline int MyRank() { return Postoffice::Get()->my_rank() / Postoffice::Get()->group_size(); }

inline Node::Role GetRole(const std::string role_str)
{
	CHECK(role_str == "worker" || role_str == "server" || role_str == "scheduler" ||
	      role_str == "joint")
		<< "Unexpected role: " << role_str
		<< " (expected worker, server, scheduler or joint)";
	return role_str == "worker" ? Node::WORKER
	       : role_str == "server" ? Node::SERVER
	       : role_str == "joint" ? Node::JOINT
				     : Node::SCHEDULER;
}

/* Starts this process's node as role (a joint process: its server and
 * worker), registered with the scheduler; with do_barrier, returns when
 * every node has started. rank: the preferred rank (DMLC_RANK), -1 none. */
inline void StartPS(int customer_id, Node::Role role, int rank, bool do_barrier,
		    const char *argv0 = nullptr)
{
	Postoffice::Get()->Start(customer_id, role, rank, do_barrier, argv0);
}
/* the role from DMLC_ROLE, with (Start) or without (StartAsync) the
 * start-up barrier */
inline void Start(int customer_id, const char *argv0 = nullptr)
{
	Postoffice::Get()->Start(customer_id, argv0, true);
}
inline void StartAsync(int customer_id, const char *argv0 = nullptr)
{
	Postoffice::Get()->Start(customer_id, argv0, false);
}

/* Stops the node (after every node called it, with do_barrier), then runs
 * the exit callbacks. */
inline void Finalize(int customer_id, const bool do_barrier = true)
{
	Postoffice::Get()->Finalize(customer_id, do_barrier);
}
inline void Finalize(int customer_id, Node::Role role, const bool do_barrier = true)
{
	(void)role;
	Postoffice::Get()->Finalize(customer_id, do_barrier);
}

inline void RegisterExitCallback(const std::function<void()> &cb)
{
	Postoffice::Get()->RegisterExitCallback(cb);
}

} // namespace ps

#endif /* PS_PS_H_ */
