// The ps-lite C++ API (include/ps, include/dmlc) over pslite, in one job:
// every role runs this program (tests/cxx/cxx_job.sh starts it with
// pslite-run -s 2 -w 2). Each worker checks what it pulls; each server and
// worker ends with one line, "cxx kv ROLE RANK: OK (...)" or "... FAILED: why".
//
// App 0: a server handle of this file's (cmd, a deferred Response from
// another thread, values kept after the answer); app 1: KVServerDefaultHandle;
// app 2: SimpleApp requests and responses.
#include <ps/ps.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace ps;

namespace {

const int kCmdAdd = 0;	   // pull: stored values + 0
const int kCmdPlus5 = 5;   // pull: stored values + 5
const int kCmdLater = 9;   // push: answered later from another thread
const int kCmdKeep = 11;   // push: the values are read again after the answer

std::atomic<int> failures{0};
std::atomic<int> checks{0};

void Expect(bool ok, const std::string &what)
{
	checks++;
	if (!ok) {
		failures++;
		LOG(ERROR) << "FAILED: " << what;
	}
}

// ------------------------------------------------------------- servers --

// App 0's handle: per key a vector of values (pushes add), pulls answer
// them plus the cmd.
class TestHandle {
public:
	void operator()(const KVMeta &meta, const KVPairs<float> &data, KVServer<float> *server)
	{
		requests++;
		if (!meta.push) {
			server->Response(meta, Answer(data, meta.cmd));
			return;
		}
		Store(data);
		if (meta.cmd == kCmdLater) {
			std::thread([meta, server] {
				std::this_thread::sleep_for(std::chrono::milliseconds(50));
				server->Response(meta);
			}).detach();
			return;
		}
		server->Response(meta);
		if (meta.cmd == kCmdKeep)
			CheckKept(data.vals);
	}

	std::atomic<int> requests{0};
	std::atomic<int> kept_ok{0};

private:
	void Store(const KVPairs<float> &data)
	{
		std::lock_guard<std::mutex> lk(mu_);
		size_t off = 0, n = data.keys.size();
		for (size_t i = 0; i < n; i++) {
			size_t len = data.lens.empty() ? data.vals.size() / n
						       : static_cast<size_t>(data.lens[(int)i]);
			std::vector<float> &v = store_[data.keys[(int)i]];
			v.resize(std::max(v.size(), len));
			for (size_t j = 0; j < len; j++)
				v[j] += data.vals[(int)(off + j)];
			off += len;
		}
	}
	KVPairs<float> Answer(const KVPairs<float> &data, int cmd)
	{
		std::lock_guard<std::mutex> lk(mu_);
		KVPairs<float> res;
		res.keys = data.keys;
		std::vector<float> vals;
		std::vector<int> lens;
		for (Key k : data.keys) {
			for (float x : store_[k])
				vals.push_back(x + (float)cmd);
			lens.push_back((int)store_[k].size());
		}
		res.vals = SArray<float>(vals);
		res.lens = SArray<int>(lens);
		return res;
	}
	// The request's values, shared with pslite's buffer: still there
	// after the answer, until the last copy goes.
	void CheckKept(SArray<float> vals)
	{
		std::thread([this, vals] {
			std::this_thread::sleep_for(std::chrono::milliseconds(30));
			// (each server holds two of the four keys: 1000, 1001 or 1002, 1003)
			bool ok = vals.size() == 2 && (vals[0] == 1000.0f || vals[0] == 1002.0f) &&
				  vals[1] == vals[0] + 1;
			if (ok)
				kept_ok++;
			else
				LOG(ERROR) << "FAILED: a kept push's values changed: " << vals;
		}).detach();
	}

	std::mutex mu_;
	std::map<Key, std::vector<float>> store_;
};

void RunServer()
{
	// (app 1: the KVServerDefaultHandle server main made before Start)
	auto handle = std::make_shared<TestHandle>();
	KVServer<float> server(0);
	server.set_request_handle([handle](const KVMeta &m, const KVPairs<float> &d,
					   KVServer<float> *s) { (*handle)(m, d, s); });
	SimpleApp app(2, 2); // (a server's customer id is its app id, as in ps-lite)
	app.set_request_handle([](const SimpleData &req, SimpleApp *a) {
		a->Response(req, "server " + std::to_string(MyRank()) + " got " + req.body);
	});
	Postoffice::Get()->Barrier(0, kWorkerGroup | kServerGroup); // the workers are done
	std::this_thread::sleep_for(std::chrono::milliseconds(100));  // kept values checked
	Expect(handle->kept_ok == NumWorkers(),
	       "kept push values checked " + std::to_string(handle->kept_ok));
	int rank = MyRank();
	Finalize(0, true);
	if (failures)
		std::printf("cxx kv server %d: FAILED (%d of %d checks)\n", rank, (int)failures,
			    (int)checks);
	else
		std::printf("cxx kv server %d: OK (%d requests)\n", rank, (int)handle->requests);
}

// ------------------------------------------------------------- workers --

// Keys on both servers: i-th key of worker rank r.
std::vector<Key> Keys(size_t n, int rank)
{
	std::vector<Key> keys;
	for (size_t i = 0; i < n; i++)
		keys.push_back(kMaxKey / n * i + (Key)rank * 16);
	return keys;
}

std::vector<float> Seq(size_t n, float base)
{
	std::vector<float> v;
	for (size_t i = 0; i < n; i++)
		v.push_back(base + (float)i);
	return v;
}

bool Same(const std::vector<float> &a, const std::vector<float> &b, float plus = 0)
{
	if (a.size() != b.size())
		return false;
	for (size_t i = 0; i < a.size(); i++)
		if (a[i] != b[i] + plus)
			return false;
	return true;
}

// Push, Pull into an empty and a sized vector, PushPull, cmd.
void CheckPushPull(KVWorker<float> &kv, int rank)
{
	std::vector<Key> keys = Keys(8, rank);
	std::vector<float> vals = Seq(16, 1.0f), got, sized(16), twice;
	kv.Wait(kv.Push(keys, vals));
	kv.Wait(kv.Pull(keys, &got));
	Expect(Same(got, vals), "Pull into an empty vector");
	kv.Wait(kv.Pull(keys, &sized, nullptr, kCmdPlus5));
	Expect(Same(sized, vals, 5.0f), "Pull with cmd 5 into a sized vector");
	kv.Wait(kv.PushPull(keys, vals, &twice));
	std::vector<float> want = vals;
	for (float &x : want)
		x *= 2;
	Expect(Same(twice, want), "PushPull");
}

// Zero-copy forms with callbacks; the pushed SArray stays alive until the
// request completes although the caller dropped it.
void CheckZeroCopy(KVWorker<float> &kv, int rank)
{
	std::vector<Key> keys = Keys(4, rank + 2);
	SArray<Key> skeys(keys);
	std::atomic<bool> freed{false}, alive_in_cb{false};
	std::atomic<int> callbacks{0};
	int ts;
	{
		float *mem = new float[4];
		for (int i = 0; i < 4; i++)
			mem[i] = 1000.0f + (float)i;
		SArray<float> vals;
		vals.reset(mem, 4, [&freed](float *p) {
			delete[] p;
			freed = true;
		});
		ts = kv.ZPush(skeys, vals, {}, kCmdKeep, [&] {
			alive_in_cb = !freed;
			callbacks++;
		});
	}
	kv.Wait(ts);
	Expect(alive_in_cb, "ZPush keeps the caller's SArray until it completes");
	Expect(callbacks == 1, "the ZPush callback ran once before Wait returned");
	for (int i = 0; i < 100 && !freed; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(5));
	Expect(freed, "the pushed SArray is freed after completion");

	SArray<float> out(4), outs;
	kv.Wait(kv.ZPull(skeys, &out, nullptr, kCmdAdd, [&] { callbacks++; }));
	Expect(callbacks == 2 && out.size() == 4 && out[3] == 1003.0f, "ZPull with a callback");
	SArray<float> more(std::vector<float>{1, 1, 1, 1});
	kv.Wait(kv.ZPushPull(skeys, more, &outs));
	Expect(outs.size() == 4 && outs[0] == 1001.0f, "ZPushPull into an empty SArray");
}

// Keys with different numbers of values: lens both ways.
void CheckLens(KVWorker<float> &kv, int rank)
{
	std::vector<Key> keys = Keys(4, rank + 4);
	std::vector<int> lens = {1, 3, 2, 4}, got_lens;
	std::vector<float> vals = Seq(10, 7.0f), got;
	kv.Wait(kv.Push(keys, vals, lens));
	kv.Wait(kv.Pull(keys, &got, &got_lens));
	Expect(Same(got, vals) && got_lens == lens, "Push and Pull with lens");
}

// A deferred Response from another server thread.
void CheckLater(KVWorker<float> &kv, int rank)
{
	std::vector<Key> keys = Keys(2, rank + 6);
	std::vector<float> vals = {3, 4}, got;
	auto t0 = std::chrono::steady_clock::now();
	kv.Wait(kv.Push(keys, vals, {}, kCmdLater));
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
		std::chrono::steady_clock::now() - t0).count();
	kv.Wait(kv.Pull(keys, &got));
	Expect(ms >= 40 && Same(got, vals), "a push answered 50 ms later from another thread");
}

// A custom slicer (the key ranges, as ps-lite's default): each server's
// slice is its own pslite request, the pulls gathered by the C++ layer.
void RangeSlicer(const KVPairs<float> &send, const std::vector<Range> &ranges,
		 KVWorker<float>::SlicedKVs *out)
{
	size_t n = send.keys.size(), per = send.vals.empty() ? 0 : send.vals.size() / n, k0 = 0;
	out->assign(ranges.size(), std::make_pair(false, KVPairs<float>()));
	for (size_t r = 0; r < ranges.size(); r++) {
		size_t k1 = k0;
		while (k1 < n && send.keys[(int)k1] < ranges[r].end())
			k1++;
		KVPairs<float> &s = (*out)[r].second;
		(*out)[r].first = k1 > k0;
		s.keys = send.keys.segment(k0, k1);
		if (per)
			s.vals = send.vals.segment(k0 * per, k1 * per);
		k0 = k1;
	}
}

void CheckSlicer(int rank)
{
	KVWorker<float> kv(0, 1);
	std::atomic<int> sliced{0};
	kv.set_slicer([&sliced](const KVPairs<float> &send, const std::vector<Range> &ranges,
				KVWorker<float>::SlicedKVs *out) {
		sliced++;
		RangeSlicer(send, ranges, out);
	});
	std::vector<Key> keys = Keys(6, rank + 8);
	std::vector<float> vals = Seq(12, 50.0f), got, sized(12);
	kv.Wait(kv.Push(keys, vals));
	kv.Wait(kv.Pull(keys, &got));
	kv.Wait(kv.Pull(keys, &sized, nullptr, kCmdPlus5));
	Expect(sliced == 3 && Same(got, vals) && Same(sized, vals, 5.0f),
	       "a custom slicer, pulls gathered from two slices");
}

// KVServerDefaultHandle: both workers push the same keys twice.
void CheckDefaultHandle()
{
	KVWorker<float> kv(1, 0);
	std::vector<Key> keys = Keys(6, 0);
	std::vector<float> vals = Seq(6, 1.0f), got;
	kv.Wait(kv.Push(keys, vals));
	kv.Wait(kv.Push(keys, vals));
	Postoffice::Get()->Barrier(0, kWorkerGroup);
	kv.Wait(kv.Pull(keys, &got));
	std::vector<float> want;
	for (float x : vals)
		want.push_back(x * 2 * (float)NumWorkers());
	Expect(Same(got, want), "KVServerDefaultHandle sums every worker's pushes");
}

// SimpleApp: a request to both servers, each answers with its own body.
void CheckSimpleApp(int rank)
{
	SimpleApp app(2, 0);
	std::mutex mu;
	std::vector<std::string> bodies;
	app.set_response_handle([&](const SimpleData &res, SimpleApp *) {
		std::lock_guard<std::mutex> lk(mu);
		bodies.push_back(res.body);
	});
	std::string body = "hello " + std::to_string(rank);
	app.Wait(app.Request(42, body, kServerGroup));
	std::lock_guard<std::mutex> lk(mu);
	Expect(bodies.size() == 2 && (bodies[0] == "server 0 got " + body ||
				      bodies[0] == "server 1 got " + body),
	       "SimpleApp request to the servers and their responses");
}

// Node queries, conversions, logging and checks.
void CheckQueries(int rank)
{
	Postoffice *po = Postoffice::Get();
	const std::vector<Range> &r = po->GetServerKeyRanges();
	Expect(NumWorkers() == 2 && NumServers() == 2 && IsWorker() && !IsServer() &&
		       !IsScheduler() && rank >= 0 && rank < 2,
	       "NumWorkers, NumServers, IsWorker, MyRank");
	Expect(r.size() == 2 && r[0].begin() == 0 && r[0].end() == r[1].begin() &&
		       r[1].end() >= kMaxKey - 2,
	       "GetServerKeyRanges");
	Expect(Postoffice::IDtoRank(Postoffice::WorkerRankToID(rank)) == rank &&
		       Postoffice::ServerRankToID(1) == 10 && po->GetNodeIDs(kServerGroup).size() == 2 &&
		       po->GetNodeIDs(kServerGroup)[1] == 10 && !po->is_recovery() &&
		       po->group_size() == 1 && po->role_str() == "worker",
	       "rank and id conversions, GetNodeIDs, is_recovery, role_str");
	bool thrown = false;
	try {
		CHECK_EQ(rank, 7) << "a failing check";
	} catch (const dmlc::Error &e) {
		thrown = std::string(e.what()).find("Check failed") != std::string::npos;
	}
	Expect(thrown, "a failed CHECK throws dmlc::Error");
	thrown = false;
	try {
		KVWorker<float> other(0, 0, 1);
	} catch (const dmlc::Error &e) {
		thrown = std::string(e.what()).find("one instance per process") != std::string::npos;
	}
	Expect(thrown, "KVWorker for instance 1 says pslite runs one instance per process");
	LOG(INFO) << "cxx kv worker " << rank << " says hello through pslite's log";
}

void RunWorker()
{
	int rank = MyRank();
	{
		KVWorker<float> kv(0, 0);
		CheckQueries(rank);
		CheckPushPull(kv, rank);
		CheckZeroCopy(kv, rank);
		CheckLens(kv, rank);
		CheckLater(kv, rank);
		CheckSlicer(rank);
	}
	CheckDefaultHandle();
	CheckSimpleApp(rank);
	Postoffice::Get()->Barrier(0, kWorkerGroup | kServerGroup);
	Finalize(0, true);
	if (failures)
		std::printf("cxx kv worker %d: FAILED (%d of %d checks)\n", rank, (int)failures,
			    (int)checks);
	else
		std::printf("cxx kv worker %d: OK (%d checks)\n", rank, (int)checks);
}

} // namespace

int main()
{
	// made before Start, as BytePS's server makes its KVServer before
	// StartAsync: joins the node when it starts
	// and deleted by an exit callback, as ps-lite's test_kv_app does
	const char *role = std::getenv("DMLC_ROLE");
	if (role && std::string(role) == "server") {
		auto store = new KVServer<float>(1);
		store->set_request_handle(KVServerDefaultHandle<float>());
		RegisterExitCallback([store] { delete store; });
	}
	Start(0);
	if (IsScheduler()) {
		Finalize(0, true);
		std::printf("cxx kv scheduler: OK\n");
	} else if (IsServer()) {
		RunServer();
	} else {
		RunWorker();
	}
	return failures ? 1 : 0;
}
