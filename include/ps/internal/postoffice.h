/*
 * ps::Postoffice: a node of this process as ps-lite programs query it.
 * One Postoffice per role and instance: GetServer(i), GetWorker(i),
 * GetScheduler(); Get() is the process's (a joint process's server's, as
 * in ps-lite). A process runs one node of its role (two for joint: a server
 * and a worker), or with DMLC_GROUP_SIZE = G > 1 its whole instance group,
 * G nodes of its role (ps-lite's model; psl_start_group), unless
 * PS_GROUP_IN_PROCESS=0, STEPMESH_GPU or DMLC_NODE_RANK make it one instance
 * of the group (StepMesh's model: the process's instance is index 0).
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
#include "ps/internal/van.h"
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
		if (psl_is_scheduler()) {
			detail::CheckInstance("Postoffice::GetServer", index);
			return Office(Node::SCHEDULER);
		}
		return Office(Node::SERVER, Instance("Postoffice::GetServer", index));
	}
	static Postoffice *GetWorker(int index = 0)
	{
		return Office(Node::WORKER, Instance("Postoffice::GetWorker", index));
	}
	/* nullptr unless this process is the scheduler */
	static Postoffice *GetScheduler()
	{
		return psl_is_scheduler() ? Office(Node::SCHEDULER) : nullptr;
	}

	/* Starts the process's nodes (both of a joint process, the whole
	 * instance group with DMLC_GROUP_SIZE > 1 unless the process is one
	 * instance of it) once; role and rank become DMLC_ROLE and DMLC_RANK
	 * (with a group in this process: the group's rank, as ps-lite's). */
	void Start(int customer_id, const Node::Role role, int rank, const bool do_barrier,
		   const char *argv0 = nullptr)
	{
		(void)argv0;
		std::unique_lock<std::mutex> lk(Process().mu);
		if (Process().started)
			return;
		bool grouped = detail::GroupInProcess() && role != Node::SCHEDULER;
		SetRoleEnv(role, rank, grouped);
		int rc = grouped ? psl_start_group(customer_id, do_barrier)
				 : psl_start(customer_id, do_barrier);
		CHECK(rc == 0) << "pslite could not start this node: " << detail::Reason(rc);
		Process().started = true;
		Process().grouped = grouped;
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
		Process().grouped = false;
		lk.unlock(); /* (a callback may delete an app, which takes the lock) */
		for (Node::Role r : {Node::SCHEDULER, Node::SERVER, Node::WORKER})
			for (int i = 0; i < PSL_MAX_GROUP; i++)
				if (Postoffice *o = Table(r, i))
					o->RunExitCallback();
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
		Select();
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

	/* The nodes this one watches (the scheduler: servers and workers; the
	 * others: the scheduler) that were lost, or, with heartbeats on, not
	 * heard from for more than t seconds (psl_dead_nodes). */
	std::vector<int> GetDeadNodes(int t = 60)
	{
		Select();
		std::vector<int> ids(8);
		int n = psl_dead_nodes(t, ids.data(), static_cast<int>(ids.size()));
		if (n > static_cast<int>(ids.size())) {
			ids.resize(static_cast<size_t>(n));
			n = psl_dead_nodes(t, ids.data(), n);
		}
		ids.resize(static_cast<size_t>(std::max(std::min(n, static_cast<int>(ids.size())), 0)));
		return ids;
	}

	/* Blocks until every node of node_group has called it. A process that
	 * runs its instance group passes it once for all of its instances (as
	 * ps-lite's group-level barrier): call it once, on Get(). */
	void Barrier(int customer_id, int node_group)
	{
		int rc = psl_barrier(customer_id, node_group);
		if (rc)
			LOG(ERROR) << "barrier of group " << node_group
				   << " failed: " << detail::Reason(rc);
	}

	/* Makes this office the node the calling thread's pslite calls act on
	 * (psl_use_instance, psl_use_role): before a C object is made for it. */
	void Select() const
	{
		if (role_ != Node::SCHEDULER && Process().grouped) {
			int rc = psl_use_instance(CRole(), instance_);
			CHECK(rc == 0) << "instance " << instance_ << ": " << detail::Reason(rc);
		} else {
			detail::UseRole(CRole());
		}
	}
	int instance() const { return instance_; }

	/* This node's van as ps-lite programs use it: van()->my_node() */
	Van *van() { return &van_; }

	/* the C role of this office */
	psl_role CRole() const
	{
		return role_ == Node::SERVER ? PSL_SERVER
		       : role_ == Node::WORKER ? PSL_WORKER
					       : PSL_SCHEDULER;
	}

private:
	Postoffice(Node::Role role, int instance)
	    : role_(role), instance_(instance), van_(role, [this] { Select(); })
	{
	}
	Postoffice(const Postoffice &) = delete;
	Postoffice &operator=(const Postoffice &) = delete;

	struct ProcessState {
		std::mutex mu;
		bool started = false;
		bool grouped = false; /* this process runs its instance group */
		std::map<int, std::function<void()>> hooks; /* WhenStarted's */
		int next_hook = 0;
	};
	static ProcessState &Process()
	{
		static ProcessState st;
		return st;
	}
	/* The office of role and instance, made on first use (kept for the
	 * process's life); Table: nullptr if not made yet. */
	static Postoffice *Office(Node::Role role, int instance = 0)
	{
		std::lock_guard<std::mutex> lk(TableMu());
		Postoffice *&o = Slot(role, instance);
		if (!o)
			o = new Postoffice(role, instance);
		return o;
	}
	static Postoffice *Table(Node::Role role, int instance)
	{
		std::lock_guard<std::mutex> lk(TableMu());
		return Slot(role, instance);
	}
	static Postoffice *&Slot(Node::Role role, int instance)
	{
		static Postoffice *tab[3][PSL_MAX_GROUP];
		int r = role == Node::SERVER ? 0 : role == Node::WORKER ? 1 : 2;
		return tab[r][instance];
	}
	static std::mutex &TableMu()
	{
		static std::mutex mu;
		return mu;
	}
	/* The office index of instance idx: idx itself where this process runs
	 * its group (0 to DMLC_GROUP_SIZE - 1), else 0 (its one instance). */
	static int Instance(const char *what, int idx)
	{
		if (!detail::GroupInProcess()) {
			detail::CheckInstance(what, idx);
			return 0;
		}
		int g = std::atoi(std::getenv("DMLC_GROUP_SIZE"));
		CHECK(idx >= 0 && idx < g && idx < PSL_MAX_GROUP)
			<< what << " for instance " << idx << ": this process runs instances 0 to "
			<< std::min(g, PSL_MAX_GROUP) - 1 << " (DMLC_GROUP_SIZE=" << g << ")";
		return idx;
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
	/* grouped: the process runs its group, and rank is the group's */
	static void SetRoleEnv(Node::Role role, int rank, bool grouped)
	{
		static const char *const names[] = {"server", "worker", "scheduler", "joint"};
		setenv("DMLC_ROLE", names[role], 1);
		const char *g = std::getenv("DMLC_GROUP_SIZE");
		if (rank >= 0 && !std::getenv("DMLC_RANK") && (grouped || !g || std::atoi(g) <= 1))
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
	int instance_;
	mutable std::mutex mu_;
	mutable std::map<int, std::vector<int>> node_ids_;
	std::vector<Range> ranges_;
	Callback exit_cb_;
	Van van_;
};

/* A line at INFO when PS_VERBOSE >= x. */
#define PS_VLOG(x) LOG_IF(INFO, (x) <= ::ps::detail::Verbose())

} // namespace ps

#endif /* PS_INTERNAL_POSTOFFICE_H_ */
