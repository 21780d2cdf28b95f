// The C++ API's pieces that need no job: SArray's sharing, Range and
// FindRange, KVPairs, the logging and check macros, Environment. Exit 0
// and "sarray_test: OK (N checks)", or 1 with a line per failed check.
#include <ps/ps.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace ps;

namespace {

int failures = 0, checks = 0;

void Expect(bool ok, const char *what)
{
	checks++;
	if (!ok) {
		failures++;
		std::printf("sarray_test: FAILED: %s\n", what);
	}
}

void CheckSharing()
{
	bool freed = false;
	{
		SArray<float> a;
		a.reset(new float[8], 8, [&freed](float *p) {
			delete[] p;
			freed = true;
		});
		for (int i = 0; i < 8; i++)
			a[i] = (float)i;
		SArray<float> seg = a.segment(2, 6);
		Expect(seg.size() == 4 && seg[0] == 2.0f && seg.data() == a.data() + 2,
		       "segment shares the buffer");
		SArray<char> bytes(a);
		Expect(bytes.size() == 32 && (void *)bytes.data() == (void *)a.data(),
		       "a typed view shares the buffer");
		a.clear();
		Expect(!freed && seg[3] == 5.0f, "a segment keeps the buffer after the array goes");
	}
	Expect(freed, "the buffer goes with the last copy");
}

void CheckResize()
{
	SArray<int> a(std::vector<int>{1, 2, 3});
	SArray<int> b = a;
	a.resize(100, 7);
	Expect(a.size() == 100 && a[2] == 3 && a[99] == 7 && b.size() == 3 && b[0] == 1,
	       "resize grows into a new buffer, copies keep the old");
	a.push_back(9);
	a.pop_back();
	Expect(a.size() == 100 && a.back() == 7 && a.front() == 1, "push_back, pop_back");
	SArray<int> c = {4, 5};
	c.append(b);
	Expect(c.size() == 5 && c[4] == 3, "initializer list, append");
	SArray<int> d;
	d.CopyFrom(c);
	Expect(d.data() != c.data() && d[1] == 5, "CopyFrom copies");
	SArray<Key> keys = {1, 5, 9, 12};
	Range r = FindRange(keys, (Key)5, (Key)12);
	Expect(r.begin() == 1 && r.end() == 3 && r.size() == 2, "FindRange");
	Expect(DebugStr(c.data(), (int)c.size()) == "[5]: 4 5 1 2 3 ", "DebugStr");
}

void CheckLogging()
{
	bool thrown = false;
	try {
		CHECK_GT(1, 2) << "one is not more than two";
	} catch (const dmlc::Error &e) {
		std::string w = e.what();
		thrown = w.find("sarray_test.cc:") != std::string::npos &&
			 w.find("Check failed: 1 > 2 (1 vs. 2) one is not more than two") != std::string::npos;
	}
	Expect(thrown, "CHECK_GT throws dmlc::Error naming the file and the check");
	int x = 3;
	Expect(CHECK_NOTNULL(&x) == &x, "CHECK_NOTNULL passes its pointer on");
	int evaluated = 0;
	LOG_IF(INFO, false) << (evaluated = 1);
	Expect(!evaluated, "LOG_IF(false) evaluates nothing");
	LOG(INFO) << "sarray_test logs through pslite";
	PS_VLOG(5) << (evaluated = 1);
	Expect(!evaluated, "PS_VLOG above PS_VERBOSE evaluates nothing");
}

void CheckEnvironment()
{
	Environment::Init({{"PSL_SARRAY_TEST_VAR", "17"}});
	Expect(GetEnv("PSL_SARRAY_TEST_VAR", 0) == 17 && std::getenv("PSL_SARRAY_TEST_VAR") &&
		       Environment::Get()->find("PSL_NO_SUCH_VAR_HERE") == nullptr,
	       "Environment::Init sets values for the program and the process");
	Expect(GetRole("joint") == Node::JOINT && GetRole("server") == Node::SERVER,
	       "GetRole");
	Expect(Postoffice::WorkerRankToID(2) == 13 && Postoffice::ServerRankToID(1) == 10 &&
		       Postoffice::IDtoRank(13) == 2 && Postoffice::IDtoRank(1) == 0,
	       "rank and id conversions");
	Expect(GetDataType<float>() == FLOAT && GetDataType<char>() == OTHER &&
		       GetDataType<int64_t>() == INT64,
	       "GetDataType");
}

} // namespace

int main()
{
	CheckSharing();
	CheckResize();
	CheckLogging();
	CheckEnvironment();
	if (failures)
		return 1;
	std::printf("sarray_test: OK (%d checks)\n", checks);
	return 0;
}
