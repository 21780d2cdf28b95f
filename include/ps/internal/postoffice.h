/*
 * ps::Postoffice: the process's node as ps-lite programs query it. pslite
 * runs one node per process (two in a joint process: a server and a worker),
 * so there is one Postoffice per role: GetServer(), GetWorker(),
 * GetScheduler(); Get() is the process's (a joint process's server's, as
 * in ps-lite). Instance index 0 is the process's instance; another index
 * is an error (pslite runs one instance per process).
 */
#ifndef PS_INTERNAL_POSTOFFICE_H_
#define PS_INTERNAL_POSTOFFICE_H_

#include <pslite.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ps/internal/env.h"
#include "ps/internal/message.h"
#include "ps/internal/pslite_bridge.h"
#include "ps/range.h"

namespace ps {

class Postoffice {
public:
	static Postoffice *Get()
	{
		if (psl_is_scheduler())
			return Office(Node::SCHEDULER);
		return Office(psl_is_server() ? Node::SERVER : Node::WORKER);
	}
	static Postoffice *GetServer(int index = 0)
	{
		detail::CheckInstance("Postoffice::GetServer", index);
		return Office(psl_is_scheduler() ? Node::SCHEDULER : Node::SERVER);
	}
	static Postoffice *GetWorker(int index = 0)
	{
		detail::CheckInstance("Postoffice::GetWorker", index);
		return Office(Node::WORKER);
	}
	/* nullptr unless this process is the scheduler */
	static Postoffice *GetScheduler()
	{
		return psl_is_scheduler() ? Office(Node::SCHEDULER) : nullptr;
	}

	/* Starts the process's node (both of a joint process) once; role and
	 * rank become DMLC_ROLE and (without instance groups) DMLC_RANK. */
	void Start(int customer_id, const Node::Role role, int rank, const bool do_barrier,
		   const char *argv0 = nullptr)
	{
		(void)argv0;
		std::unique_lock<std::mutex> lk(Process().mu);
		if (Process().started)
			return;
		SetRoleEnv(role, rank);
		int rc = psl_start(customer_id, do_barrier);
		CHECK(rc == 0) << "pslite could not start this node: " << detail::Reason(rc);
		Process().started = true;
		std::map<int, std::function<void()>> hooks;
		hooks.swap(Process().hooks);
		lk.unlock();
		for (auto &h : hooks)
			h.second();
	}

	/* Runs f once this process's node has started: now if it has, else at
	 * the end of Start (an app made before StartPS, as BytePS's server
	 * makes its KVServer before StartAsync). Returns an id for
	 * CancelWhenStarted, or -1 if f ran at once. */
	static int WhenStarted(const std::function<void()> &f)
	{
		std::unique_lock<std::mutex> lk(Process().mu);
		if (Process().started) {
			lk.unlock();
			f();
			return -1;
		}
		int id = Process().next_hook++;
		Process().hooks[id] = f;
		return id;
	}
	static void CancelWhenStarted(int id)
	{
		std::lock_guard<std::mutex> lk(Process().mu);
		Process().hooks.erase(id);
	}
	/* ps-lite's older form: the role from DMLC_ROLE */
	void Start(int customer_id, const char *argv0, const bool do_barrier)
	{
		Start(customer_id, RoleFromEnv(), -1, do_barrier, argv0);
	}

	/* Stops the node (after a barrier of every node if do_barrier), then
	 * runs the exit callbacks. Says so if the job lost a node. */
	void Finalize(const int customer_id, const bool do_barrier = true)
	{
		std::unique_lock<std::mutex> lk(Process().mu);
		if (!Process().started)
			return;
		int rc = psl_finalize(customer_id, do_barrier);
		if (rc)
			LOG(ERROR) << "pslite finalize: " << detail::Reason(rc);
		char why[256];
		if (psl_job_lost(why, sizeof(why)))
			LOG(ERROR) << "this job lost a node: " << why;
		Process().started = false;
		lk.unlock(); /* (a callback may delete an app, which takes the lock) */
		for (Node::Role r : {Node::SCHEDULER, Node::SERVER, Node::WORKER})
			Office(r)->RunExitCallback();
	}

	/* The node ids of node_id (a node id or an or of kScheduler,
	 * kServerGroup, kWorkerGroup): every instance of the groups. */
	const std::vector<int> &GetNodeIDs(int node_id) const
	{
		std::lock_guard<std::mutex> lk(mu_);
		auto it = node_ids_.find(node_id);
		if (it != node_ids_.end())
			return it->second;
		std::vector<int> &ids = node_ids_[node_id];
		if (node_id > PSL_GROUP_ALL || node_id < 1) {
			ids.push_back(node_id);
			return ids;
		}
		if (node_id & PSL_GROUP_SCHEDULER)
			ids.push_back(1);
		for (int r = 0; (node_id & PSL_GROUP_SERVERS) && r < num_server_instances(); r++)
			ids.push_back(ServerRankToID(r));
		for (int r = 0; (node_id & PSL_GROUP_WORKERS) && r < num_worker_instances(); r++)
			ids.push_back(WorkerRankToID(r));
		return ids;
	}

	/* Server rank i holds keys [ranges[i].begin(), ranges[i].end()). */
	const std::vector<Range> &GetServerKeyRanges()
	{
		std::lock_guard<std::mutex> lk(mu_);
		if (ranges_.empty()) {
			uint64_t b, e;
			for (int r = 0; r < num_servers() && !psl_server_key_range(r, &b, &e); r++)
				ranges_.emplace_back(b, e);
		}
		return ranges_;
	}

	using Callback = std::function<void()>;
	/* cb runs at the end of Finalize, after the node stopped */
	void RegisterExitCallback(const Callback &cb)
	{
		std::lock_guard<std::mutex> lk(mu_);
		exit_cb_ = cb;
	}

	int GroupWorkerRankToInstanceID(int rank, int instance_idx)
	{
		return WorkerRankToID(rank * group_size() + instance_idx);
	}
	int GroupServerRankToInstanceID(int rank, int instance_idx)
	{
		return ServerRankToID(rank * group_size() + instance_idx);
	}
	int InstanceIDtoGroupRank(int id) { return IDtoRank(id) / group_size(); }
	static int WorkerRankToID(int rank) { return psl_worker_rank_to_id(rank); }
	static int ServerRankToID(int rank) { return psl_server_rank_to_id(rank); }
	static int IDtoRank(int id) { return psl_id_to_rank(id); }

	int group_size() const { return std::max(psl_group_size(), 1); }
	int num_workers() const { return psl_num_workers(); }
	int num_servers() const { return psl_num_servers(); }
	int num_worker_instances() const { return num_workers() * group_size(); }
	int num_server_instances() const { return num_servers() * group_size(); }
	/* the instance's rank among its role's instances (ps::MyRank() is the
	 * group's) */
	int my_rank() const
	{
		detail::UseRole(CRole());
		return std::max(psl_my_instance_rank(), 0);
	}
	int preferred_rank() const { return GetEnv("DMLC_RANK", -1); }
	int is_worker() const { return role_ == Node::WORKER && psl_is_worker(); }
	int is_server() const { return role_ == Node::SERVER && psl_is_server(); }
	int is_scheduler() const { return role_ == Node::SCHEDULER && psl_is_scheduler(); }
	std::string role_str() const
	{
		return is_worker() ? "worker" : is_server() ? "server" : is_scheduler() ? "scheduler" : "";
	}
	int verbose() const { return detail::Verbose(); }
	/* this node took a lost node's place (PS_RECOVERY, docs/recovery.md) */
	bool is_recovery() const { return psl_is_recovery(); }

	/* Blocks until every node of node_group has called it. */
	void Barrier(int customer_id, int node_group)
	{
		int rc = psl_barrier(customer_id, node_group);
		if (rc)
			LOG(ERROR) << "barrier of group " << node_group
				   << " failed: " << detail::Reason(rc);
	}

	/* the C role of this office */
	psl_role CRole() const
	{
		return role_ == Node::SERVER ? PSL_SERVER
		       : role_ == Node::WORKER ? PSL_WORKER
					       : PSL_SCHEDULER;
	}

private:
	explicit Postoffice(Node::Role role) : role_(role) {}
	Postoffice(const Postoffice &) = delete;
	Postoffice &operator=(const Postoffice &) = delete;

	struct ProcessState {
		std::mutex mu;
		bool started = false;
		std::map<int, std::function<void()>> hooks; /* WhenStarted's */
		int next_hook = 0;
	};
	static ProcessState &Process()
	{
		static ProcessState st;
		return st;
	}
	static Postoffice *Office(Node::Role role)
	{
		static Postoffice server(Node::SERVER), worker(Node::WORKER),
			scheduler(Node::SCHEDULER);
		return role == Node::SERVER ? &server : role == Node::WORKER ? &worker : &scheduler;
	}

	static Node::Role RoleFromEnv()
	{
		const char *r = Environment::Get()->find("DMLC_ROLE");
		std::string s = r ? r : "";
		CHECK(s == "worker" || s == "server" || s == "scheduler" || s == "joint")
			<< "DMLC_ROLE=" << s << ": expected worker, server, scheduler or joint";
		return s == "worker" ? Node::WORKER
		       : s == "server" ? Node::SERVER
		       : s == "joint" ? Node::JOINT
				      : Node::SCHEDULER;
	}
	static void SetRoleEnv(Node::Role role, int rank)
	{
		static const char *const names[] = {"server", "worker", "scheduler", "joint"};
		setenv("DMLC_ROLE", names[role], 1);
		const char *g = std::getenv("DMLC_GROUP_SIZE");
		if (rank >= 0 && !std::getenv("DMLC_RANK") && (!g || std::atoi(g) <= 1))
			setenv("DMLC_RANK", std::to_string(rank).c_str(), 1);
	}

	void RunExitCallback()
	{
		Callback cb;
		{
			std::lock_guard<std::mutex> lk(mu_);
			cb.swap(exit_cb_);
			ranges_.clear();
			node_ids_.clear();
		}
		if (cb)
			cb();
	}

	Node::Role role_;
	mutable std::mutex mu_;
	mutable std::map<int, std::vector<int>> node_ids_;
	std::vector<Range> ranges_;
	Callback exit_cb_;
};

/* A line at INFO when PS_VERBOSE >= x. */
#define PS_VLOG(x) LOG_IF(INFO, (x) <= ::ps::detail::Verbose())

} // namespace ps

#endif /* PS_INTERNAL_POSTOFFICE_H_ */
