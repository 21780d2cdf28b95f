// ps-lite's instance groups in one process through the C++ API (ps-lite's
// model: StartPS with DMLC_GROUP_SIZE = G > 1 starts G nodes of the role in
// this process; Postoffice::GetWorker(i) / GetServer(i), KVWorker(app,
// customer, i), KVServer(app, false, i)). tests/cxx/cxx_group.sh starts it as
// the scheduler, server processes and worker processes, DMLC_RANK the
// process's group rank.
//
// Server process: one KVServer per instance; each keeps what is pushed (per
// key, pushes overwrite) and answers pulls with it, and checks that every
// request comes from the worker instance of its own index: the keys name the
// worker's instance rank (range start + rank x 100 + k) and KVMeta::sender
// is that worker's group's id (WorkerRankToID(rank / G), as ps-lite's and
// StepMesh's KVServer give a handler).
// Worker process: one thread per instance, each with its own KVWorker on
// that instance: rounds of push then pull of keys of its own in every
// server group's range, every value checked. Each instance's rank is
// checked (group rank x G + instance). Lines: "cxx group ROLE R.I: OK ...".
#include <ps/ps.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace ps;

namespace {

int Env(const char *name, int dflt)
{
	const char *v = std::getenv(name);
	return v ? std::atoi(v) : dflt;
}

class Store {
public:
	Store(int instance, int group, Key base) : instance_(instance), group_(group), base_(base)
	{
	}
	void operator()(const KVMeta &meta, const KVPairs<float> &data, KVServer<float> *server)
	{
		requests++;
		int rank = data.keys.size() && data.keys[0] >= base_
				   ? static_cast<int>((data.keys[0] - base_) / 100)
				   : -1;
		int want = rank >= 0 ? Postoffice::WorkerRankToID(rank / group_) : -1;
		if (rank % group_ != instance_ || meta.sender != want) {
			if (wrong++ == 0)
				LOG(ERROR) << "server instance " << instance_ << " got a request from "
					   << "node " << meta.sender << " with keys of worker instance rank "
					   << rank << " (whose group's id is " << want << ")";
		}
		KVPairs<float> res;
		std::lock_guard<std::mutex> lk(mu_);
		size_t per = data.keys.size() ? data.vals.size() / data.keys.size() : 0;
		for (size_t i = 0; i < data.keys.size(); i++) {
			std::vector<float> &v = vals_[data.keys[i]];
			if (meta.push) {
				v.assign(data.vals.begin() + i * per, data.vals.begin() + (i + 1) * per);
				continue;
			}
			res.keys.push_back(data.keys[i]);
			for (float x : v)
				res.vals.push_back(x);
			res.lens.push_back(static_cast<int>(v.size()));
		}
		server->Response(meta, res);
	}
	std::atomic<int> requests{0}, wrong{0};

private:
	int instance_, group_;
	Key base_; // this server group's key range starts here
	std::mutex mu_;
	std::map<Key, std::vector<float>> vals_;
};

const int kRounds = 20, kKeys = 4, kLen = 16;

// One worker instance's work; returns the failures.
int RunWorker(int instance, int group, int grank)
{
	KVWorker<float> kv(0, 0, instance);
	Postoffice *po = Postoffice::GetWorker(instance);
	int want_rank = grank * group + instance, bad = 0;
	if (po->my_rank() != want_rank) {
		LOG(ERROR) << "worker instance " << instance << ": rank " << po->my_rank()
			   << ", expected " << want_rank;
		bad++;
	}
	std::vector<Key> keys;
	for (const Range &r : po->GetServerKeyRanges())
		for (int k = 0; k < kKeys; k++)
			keys.push_back(r.begin() + static_cast<Key>(want_rank * 100 + k));
	for (int round = 0; round < kRounds; round++) {
		std::vector<float> vals(keys.size() * kLen), got;
		for (size_t i = 0; i < vals.size(); i++)
			vals[i] = static_cast<float>(want_rank * 1000 + round * 10) + i % 7;
		kv.Wait(kv.Push(keys, vals));
		kv.Wait(kv.Pull(keys, &got));
		if (got != vals) {
			LOG(ERROR) << "worker instance " << instance << " round " << round
				   << ": pulled " << got.size() << " values, not what it pushed";
			bad++;
		}
	}
	std::printf("cxx group worker %d.%d: OK (rank %d, %d rounds of %zu keys checked)\n",
		    grank, instance, want_rank, kRounds, keys.size());
	return bad;
}

// Each instance's van()->my_node(): started, its own id and port, the
// office's role; the scheduler's port is DMLC_PS_ROOT_PORT. Failures.
int CheckNodes(int group)
{
	std::set<int> ids, ports;
	int bad = 0, n = IsScheduler() ? 1 : group;
	for (int i = 0; i < n; i++) {
		Postoffice *po = IsScheduler() ? Postoffice::Get()
				 : IsServer()  ? Postoffice::GetServer(i)
					       : Postoffice::GetWorker(i);
		const Node &me = po->van()->my_node();
		Node::Role want = IsScheduler() ? Node::SCHEDULER : IsServer() ? Node::SERVER : Node::WORKER;
		if (!po->van()->IsReady() || me.role != want || me.hostname.empty() || me.port <= 0 ||
		    !ids.insert(me.id).second || !ports.insert(me.port).second ||
		    (IsScheduler() && (me.id != 1 || me.port != Env("DMLC_PS_ROOT_PORT", 0)))) {
			LOG(ERROR) << "instance " << i << ": van()->my_node() is " << me.DebugString();
			bad++;
		}
	}
	return bad;
}

} // namespace

int main()
{
	const char *role = std::getenv("DMLC_ROLE");
	int group = Env("DMLC_GROUP_SIZE", 1), grank = Env("DMLC_RANK", -1), bad = 0;
	std::vector<std::unique_ptr<KVServer<float>>> servers;
	std::vector<std::unique_ptr<Store>> stores;

	StartPS(0, GetRole(role ? role : ""), grank, true);
	bad += CheckNodes(group);
	if (IsServer()) {
		for (int i = 0; i < group; i++) {
			Postoffice *po = Postoffice::GetServer(i);
			stores.emplace_back(new Store(i, group, po->GetServerKeyRanges()[grank].begin()));
			servers.emplace_back(new KVServer<float>(0, false, i));
			Store *st = stores.back().get();
			servers.back()->set_request_handle(
				[st](const KVMeta &m, const KVPairs<float> &d, KVServer<float> *s) {
					(*st)(m, d, s);
				});
			if (Postoffice::GetServer(i)->my_rank() != grank * group + i) {
				LOG(ERROR) << "server instance " << i << ": rank "
					   << Postoffice::GetServer(i)->my_rank();
				bad++;
			}
		}
	}
	Postoffice::Get()->Barrier(0, kWorkerGroup + kServerGroup + kScheduler);
	if (!IsServer() && !IsScheduler()) {
		std::vector<std::thread> threads;
		std::vector<int> fails(group);
		for (int i = 0; i < group; i++)
			threads.emplace_back([i, group, grank, &fails] { fails[i] = RunWorker(i, group, grank); });
		for (auto &t : threads)
			t.join();
		for (int f : fails)
			bad += f;
	}
	Postoffice::Get()->Barrier(0, kWorkerGroup + kServerGroup + kScheduler);
	for (int i = 0; i < static_cast<int>(stores.size()); i++) {
		bad += stores[i]->wrong;
		if (stores[i]->requests == 0) {
			LOG(ERROR) << "server instance " << i << " got no request";
			bad++;
		}
		std::printf("cxx group server %d.%d: %s (%d requests)\n", grank, i, bad ? "FAILED" : "OK",
			    stores[i]->requests.load());
	}
	Finalize(0, true);
	servers.clear();
	if (bad)
		std::printf("cxx group: FAILED (%d)\n", bad);
	return bad ? 1 : 0;
}
