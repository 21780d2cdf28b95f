// A worker on C++ ps-lite (byteps branch) that talks to the servers the way
// BytePS's worker does, for tests/interop/run.sh (-y). Not built by the
// project: compile it against a ps-lite build of your own (docs/interop.md):
//
//   g++ -std=c++14 -O2 -pthread -I$PSLITE/include byteps_worker.cc \
//       $PSLITE/libps.a -lzmq -o byteps_worker
//
// What it does as BytePS's worker does (BytePS v0.2.5.post16 and later,
// byteps/common/global.cc and core_loops.cc; docs/pslite-server.md):
//  * start: StartPS(0, WORKER, -1, do_barrier=true), a KVWorker<char>(0, 0),
//    then Barrier(0, workers + servers + scheduler);
//  * keys: a tensor partition's key (tensor << 16) + partition, placed in
//    one server's key range (GetServerKeyRanges()[server].begin() + key);
//  * cmd: the Cantor pairing of kDefaultPushPull (0) and the data type
//    (float32: 0), so cmd 0; one key per request, lens = {bytes};
//  * every partition first pushed once and waited for (BytePS's InitTensor),
//    then rounds of ZPush and, once the push is answered, ZPull;
//  * stop: Finalize(0, WORKER, do_barrier=true).
// Then it checks every pulled value: sync mode (the default) the round's sum
// over the workers, exactly; async (BYTEPS_ENABLE_ASYNC=1) the store after
// every worker's last push, which needs a barrier of the workers before the
// last pull (its own check; BytePS's workers do not pass it).
//
// Environment: DMLC_* as for any ps-lite worker; BYTEPS_ENABLE_ASYNC;
// BYTEPS_PARTITION_BYTES (262144 here); BPS_TEST_TENSORS (4), BPS_TEST_BYTES
// (bytes of tensor 0; tensor t has about (t+1) times as many; 600000),
// BPS_TEST_ROUNDS (10); BPS_TEST_ONE_START_BARRIER=1 skips the Barrier after
// StartPS (not BytePS's sequence: the job cannot end).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ps/ps.h"

namespace {

int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

struct Part {
	ps::SArray<ps::Key> keys;
	ps::SArray<int> lens;
	std::vector<float> push, pull;
};

// The value of element i that worker w pushes in round r: small integers,
// exact in float32 when summed.
float value(int w, int r, size_t i)
{
	return static_cast<float>((w + 1) * r + static_cast<int>(i % 7));
}

} // namespace

int main()
{
	const int tensors = env_int("BPS_TEST_TENSORS", 4);
	const int bytes = env_int("BPS_TEST_BYTES", 600000);
	const int rounds = env_int("BPS_TEST_ROUNDS", 10);
	const bool async = env_int("BYTEPS_ENABLE_ASYNC", 0) != 0;
	const bool one_barrier = env_int("BPS_TEST_ONE_START_BARRIER", 0) != 0;
	const int cmd = 0; // kDefaultPushPull, float32
	int part_bytes = env_int("BYTEPS_PARTITION_BYTES", 262144);
	part_bytes = (part_bytes + 4095) / 4096 * 4096;

	// BytePS: GetOrInitPS()
	ps::StartPS(0, ps::Node::WORKER, -1, true, "byteps\0");
	auto *kv = new ps::KVWorker<char>(0, 0, 0);
	if (!one_barrier && !ps::Postoffice::Get()->is_recovery())
		ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup + ps::kServerGroup +
							  ps::kScheduler);
	const int me = ps::Postoffice::Get()->my_rank();
	const int W = ps::NumWorkers();
	const auto &krs = ps::Postoffice::Get()->GetServerKeyRanges();

	std::vector<Part> parts;
	for (int t = 0; t < tensors; t++) {
		size_t n = (static_cast<size_t>(bytes) * (t + 1) + 36 * t) / 4;
		size_t per = static_cast<size_t>(part_bytes) / 4;
		for (size_t off = 0, p = 0; off < n; off += per, p++) {
			Part q;
			size_t len = std::min(per, n - off);
			uint64_t key = (static_cast<uint64_t>(t) << 16) + p;
			int server = static_cast<int>((t + p) % krs.size());
			q.keys.push_back(krs[server].begin() + key);
			q.lens.push_back(static_cast<int>(len * 4));
			q.push.resize(len);
			q.pull.resize(len);
			parts.push_back(std::move(q));
		}
	}

	auto push_all = [&](int r) {
		std::vector<int> ts;
		for (auto &q : parts) {
			for (size_t i = 0; i < q.push.size(); i++)
				q.push[i] = async ? (r ? static_cast<float>(me + 1) : value(0, 0, i))
						  : value(me, r, i);
			ps::SArray<char> vals(reinterpret_cast<char *>(q.push.data()),
					      q.push.size() * 4, false);
			ts.push_back(kv->ZPush(q.keys, vals, q.lens, cmd));
		}
		for (int t : ts)
			kv->Wait(t);
	};
	auto pull_all = [&]() {
		std::vector<int> ts;
		std::vector<ps::SArray<char> *> bufs;
		for (auto &q : parts) {
			auto *vals = new ps::SArray<char>(reinterpret_cast<char *>(q.pull.data()),
							  q.pull.size() * 4, false);
			bufs.push_back(vals);
			ts.push_back(kv->ZPull(q.keys, vals, &q.lens, cmd));
		}
		for (int t : ts)
			kv->Wait(t);
		for (auto *b : bufs)
			delete b;
	};

	long bad = 0, checked = 0;
	auto check = [&](int r, const char *when) {
		for (auto &q : parts)
			for (size_t i = 0; i < q.pull.size(); i++) {
				float want = async ? value(0, 0, i) + static_cast<float>(r) * W * (W + 1) / 2
						   : static_cast<float>(r * W * (W + 1) / 2 +
									W * static_cast<int>(i % 7));
				checked++;
				if (q.pull[i] != want && bad++ < 5)
					fprintf(stderr,
						"byteps_worker %d: %s: key %llu element %zu is %g, "
						"expected %g\n",
						me, when, (unsigned long long)q.keys[0], i,
						q.pull[i], want);
			}
	};

	push_all(0); // BytePS's InitTensor: every partition once, waited for
	for (int r = 1; r <= rounds; r++) {
		push_all(r);
		pull_all();
		if (!async)
			check(r, "round");
	}
	if (async) {
		ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
		pull_all();
		check(rounds, "after every worker's last push");
	}
	printf("byteps_worker %d: %s: %s, %d rounds of %zu partitions, %ld elements checked\n",
	       me, bad ? "FAIL" : "PASS", async ? "async" : "sync", rounds, parts.size(),
	       checked);
	fflush(stdout);

	// BytePS: BytePSGlobal::Shutdown()
	ps::Finalize(0, ps::Node::WORKER, true);
	delete kv;
	return bad ? 1 : 0;
}
