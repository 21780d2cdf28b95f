// A benchmark in the manner of ps-lite's test_benchmark, on the ps-lite C++
// API over pslite: each server registers a receive buffer per worker and
// key (RegisterRecvBufferWithRank) and answers a pull with it; each worker
// runs BENCH_THREADS KVWorker<char>s (customers 0, 1, ...) that ZPush and
// then ZPull BENCH_KEYS keys of BENCH_LEN bytes per server for BENCH_ROUNDS
// rounds, and checks every pulled byte. Each node ends with one line,
// "cxx bench ROLE RANK: OK ..." or "... FAILED ...".
#include <ps/ps.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace ps;

namespace {

std::atomic<int> failures{0};

int Env(const char *name, int dflt)
{
	const char *v = Environment::Get()->find(name);
	return v ? std::atoi(v) : dflt;
}

const int kLen = Env("BENCH_LEN", 65536);
const int kRounds = Env("BENCH_ROUNDS", 20);
const int kKeys = Env("BENCH_KEYS", 4);
const int kThreads = Env("BENCH_THREADS", 2);

// Key j (of kKeys * kThreads per server) of server s.
Key KeyOf(int server, int j)
{
	return Postoffice::Get()->GetServerKeyRanges()[server].begin() + (Key)j;
}

char Byte(int worker, int j, int round, int i)
{
	return (char)(worker * 31 + j * 7 + round * 3 + i);
}

// ------------------------------------------------------------- servers --

class BenchServer {
public:
	BenchServer() : server_(0)
	{
		server_.set_request_handle([this](const KVMeta &m, const KVPairs<char> &d,
						  KVServer<char> *s) { Handle(m, d, s); });
		for (int w = 0; w < NumWorkers(); w++)
			for (int j = 0; j < kKeys * kThreads; j++)
				Register(w, j);
	}
	int pushes() const { return pushes_; }

private:
	struct Slot {
		SArray<Key> keys;
		SArray<char> vals;
		SArray<int> lens;
	};
	void Register(int worker, int j)
	{
		Key key = KeyOf(Postoffice::GetServer()->my_rank(), j);
		Slot &s = slots_[std::make_pair(worker, key)];
		s.keys = SArray<Key>(std::vector<Key>{key});
		s.vals = SArray<char>(std::vector<char>((size_t)kLen));
		s.lens = SArray<int>(std::vector<int>{kLen});
		server_.RegisterRecvBufferWithRank(worker, s.keys, s.vals, s.lens);
	}
	void Handle(const KVMeta &meta, const KVPairs<char> &data, KVServer<char> *server)
	{
		int worker = Postoffice::IDtoRank(meta.sender);
		Slot &s = slots_.at(std::make_pair(worker, data.keys[0]));
		if (!meta.push) {
			server->Response(meta, KVPairs<char>{s.keys, s.vals, s.lens});
			return;
		}
		pushes_++;
		if (data.vals.data() != s.vals.data() || data.vals.size() != (size_t)kLen ||
		    data.lens.size() != 1 || data.lens[0] != kLen) {
			failures++;
			LOG(ERROR) << "FAILED: a push of key " << data.keys[0] << " from worker "
				   << worker << " did not arrive in its registered buffer";
		}
		server->Response(meta);
	}

	KVServer<char> server_;
	std::map<std::pair<int, Key>, Slot> slots_;
	std::atomic<int> pushes_{0};
};

// ------------------------------------------------------------- workers --

struct Buffers {
	std::vector<SArray<Key>> keys;
	std::vector<SArray<char>> push, pull;
	std::vector<SArray<int>> lens;
};

Buffers Make(int thread)
{
	Buffers b;
	for (int s = 0; s < NumServers(); s++)
		for (int j = thread * kKeys; j < (thread + 1) * kKeys; j++) {
			b.keys.push_back(SArray<Key>(std::vector<Key>{KeyOf(s, j)}));
			b.push.push_back(SArray<char>((size_t)kLen));
			b.pull.push_back(SArray<char>((size_t)kLen));
			b.lens.push_back(SArray<int>(std::vector<int>{kLen}));
		}
	return b;
}

void Round(KVWorker<char> &kv, Buffers &b, int round)
{
	std::vector<int> ts;
	for (size_t k = 0; k < b.keys.size(); k++) {
		for (int i = 0; i < kLen; i++)
			b.push[k][i] = Byte(Postoffice::GetWorker()->my_rank(), (int)b.keys[k][0],
					    round, i);
		ts.push_back(kv.ZPush(b.keys[k], b.push[k], b.lens[k]));
	}
	for (int t : ts)
		kv.Wait(t);
	ts.clear();
	for (size_t k = 0; k < b.keys.size(); k++)
		ts.push_back(kv.ZPull(b.keys[k], &b.pull[k], &b.lens[k]));
	for (int t : ts)
		kv.Wait(t);
	for (size_t k = 0; k < b.keys.size(); k++)
		if (std::memcmp(b.pull[k].data(), b.push[k].data(), (size_t)kLen) != 0) {
			failures++;
			LOG(ERROR) << "FAILED: round " << round << ": key " << b.keys[k][0]
				   << " pulled other bytes than pushed";
		}
}

void RunThread(int thread, double *seconds)
{
	KVWorker<char> kv(0, thread);
	Buffers b = Make(thread);
	auto t0 = std::chrono::steady_clock::now();
	for (int r = 0; r < kRounds; r++)
		Round(kv, b, r);
	*seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// (a joint process runs both: its server, then its worker)
void RunWorker(int rank)
{
	std::vector<std::thread> threads;
	std::vector<double> seconds((size_t)kThreads);
	for (int t = 0; t < kThreads; t++)
		threads.emplace_back(RunThread, t, &seconds[(size_t)t]);
	for (auto &t : threads)
		t.join();
	double bytes = 2.0 * kLen * kKeys * NumServers() * kRounds, gbps = 0;
	for (double s : seconds)
		gbps += bytes * 8 / s / 1e9;
	std::printf("cxx bench worker %d: %s: %d threads x %d rounds of %d keys x %d bytes, "
		    "%.2f Gbit/s push+pull, data checked\n",
		    rank, failures ? "FAILED" : "OK", kThreads, kRounds, kKeys * NumServers(), kLen,
		    gbps);
}

} // namespace

int main()
{
	StartPS(0, GetRole(CHECK_NOTNULL(Environment::Get()->find("DMLC_ROLE"))), -1, true);
	std::unique_ptr<BenchServer> server;
	int srank = Postoffice::GetServer()->my_rank(), wrank = Postoffice::GetWorker()->my_rank();
	if (IsServer())
		server.reset(new BenchServer());
	if (!IsScheduler())
		Postoffice::Get()->Barrier(0, kWorkerGroup | kServerGroup); // buffers registered
	if (IsWorker())
		RunWorker(wrank);
	Finalize(0, true);
	if (server)
		std::printf("cxx bench server %d: %s (%d pushes)\n", srank,
			    failures || !server->pushes() ? "FAILED" : "OK", server->pushes());
	if (IsScheduler())
		std::printf("cxx bench scheduler: OK\n");
	return failures ? 1 : 0;
}
