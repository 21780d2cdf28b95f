// dmlc/logging.h as ps-lite programs see it: what a failed CHECK_EQ (and
// the other comparisons, CHECK, CHECK_NOTNULL, DCHECK_*) prints, that an
// uncaught one ends the process abnormally (SIGABRT), that each operand is
// evaluated once, and which lines LOG, LOG_IF, PS_VLOG and VLOG write.
// The failing checks that must end a process run in a child: this program
// started again with one argument naming the case. Exit 0 and
// "check_test: OK (N checks)", or 1 with a line per failed check.
#include <ps/ps.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#define EXPECT_PROGRAM "check_test"
#include "expect.h"

namespace {

bool Has(const std::string &text, const std::string &part)
{
	return text.find(part) != std::string::npos;
}

/* This program again with argument mode and env (NAME=value, or NAME= to
 * unset it): its exit status and what it wrote on stderr. */
struct Child {
	int status = -1;
	std::string err;
};
Child Run(const char *mode, const std::vector<std::string> &env = {})
{
	Child c;
	int fd[2];
	if (pipe(fd) != 0)
		return c;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		for (const std::string &e : env) {
			size_t eq = e.find('=');
			std::string name = e.substr(0, eq), val = e.substr(eq + 1);
			if (val.empty())
				unsetenv(name.c_str());
			else
				setenv(name.c_str(), val.c_str(), 1);
		}
		execl("/proc/self/exe", "check_test", mode, static_cast<char *>(nullptr));
		_exit(127);
	}
	close(fd[1]);
	char buf[4096];
	ssize_t n;
	while ((n = read(fd[0], buf, sizeof(buf))) > 0)
		c.err.append(buf, static_cast<size_t>(n));
	close(fd[0]);
	waitpid(pid, &c.status, 0);
	return c;
}

bool Aborted(const Child &c) { return WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT; }

/* The message of the dmlc::Error that f throws ("" if none). */
template <typename F>
std::string Thrown(F f)
{
	try {
		f();
	} catch (const dmlc::Error &e) {
		return e.what();
	}
	return "";
}

enum class Colour { RED = 1, GREEN = 7 };
struct Opaque {
	int v;
	bool operator==(const Opaque &o) const { return v == o.v; }
	bool operator!=(const Opaque &o) const { return v != o.v; }
};

int Next(int *counter) { return ++*counter; }

/* ---- the children ---- */

int ChildCheckEq()
{
	int a = 3;
	CHECK_EQ(a, 4) << "the answer is " << 42;
	return 0; /* not reached */
}

int ChildCheck()
{
	std::vector<int> v;
	CHECK(!v.empty()) << "need one value";
	return 0;
}

int ChildLogFatal()
{
	LOG(FATAL) << "given up";
	return 0;
}

int ChildLogLines()
{
	LOG(INFO) << "info line";
	LOG(WARNING) << "warning line";
	LOG(ERROR) << "error line";
	LL << "ll line";
	LOG_IF(INFO, 1 + 1 == 2) << "log_if true";
	LOG_IF(INFO, 1 + 1 == 3) << "log_if false";
	PS_VLOG(1) << "vlog one";
	PS_VLOG(2) << "vlog two";
	PS_VLOG(3) << "vlog three";
	VLOG(2) << "dmlc vlog two";
	VLOG(3) << "dmlc vlog three";
	DLOG(INFO) << "dlog line";
	return 0;
}

/* ---- in this process ---- */

void Comparisons()
{
	int three = 3, four = 4;
	std::string w = Thrown([&] { CHECK_EQ(three, four) << "msg"; });
	Expect(Has(w, "check_test.cc:") && Has(w, "Check failed: three == four (3 vs. 4) msg"),
	       "CHECK_EQ names the operands and their values: " + w);
	w = Thrown([&] { CHECK_NE(three, 3); });
	Expect(Has(w, "Check failed: three != 3 (3 vs. 3) "), "CHECK_NE: " + w);
	w = Thrown([&] { CHECK_LT(four, three) << "lt"; });
	Expect(Has(w, "Check failed: four < three (4 vs. 3) lt"), "CHECK_LT: " + w);
	w = Thrown([&] { CHECK_LE(four, three); });
	Expect(Has(w, "Check failed: four <= three (4 vs. 3) "), "CHECK_LE: " + w);
	w = Thrown([&] { CHECK_GT(three, four); });
	Expect(Has(w, "Check failed: three > four (3 vs. 4) "), "CHECK_GT: " + w);
	w = Thrown([&] { CHECK_GE(three, four) << "ge " << 1.5; });
	Expect(Has(w, "Check failed: three >= four (3 vs. 4) ge 1.5"), "CHECK_GE: " + w);
	std::string s = "abc";
	w = Thrown([&] { CHECK_EQ(s, std::string("abd")); });
	Expect(Has(w, "Check failed: s == std::string(\"abd\") (abc vs. abd) "),
	       "CHECK_EQ on strings: " + w);
	w = Thrown([&] { CHECK(three > four) << "why"; });
	Expect(Has(w, "Check failed: three > four why"), "CHECK(x) << text: " + w);
	Expect(Thrown([&] {
		       CHECK_EQ(three, 3) << "not shown";
		       CHECK_LE(three, four);
		       CHECK_GE(four, four);
		       CHECK(three < four);
	       }).empty(),
	       "checks that hold throw nothing");

	/* each operand evaluated once, passing or failing */
	int n = 0, m = 0;
	CHECK_EQ(Next(&n), 1);
	CHECK_LE(n++, Next(&m));
	Expect(n == 2 && m == 1, "a passing check evaluates each operand once");
	w = Thrown([&] { CHECK_EQ(Next(&n), Next(&m)) << "n and m"; });
	Expect(n == 3 && m == 2 && Has(w, "Check failed: Next(&n) == Next(&m) (3 vs. 2) n and m"),
	       "a failing check evaluates each operand once and prints those values: " + w);
	/* the message is not evaluated when the check holds */
	int streamed = 0;
	CHECK_EQ(1, 1) << (streamed = 1);
	CHECK(true) << (streamed = 1);
	Expect(!streamed, "the text after a check that holds is not evaluated");

	/* mixed signedness (no -Wsign-compare error), a pointer and 0,
	 * nullptr, enum class, values that cannot be printed */
	std::vector<int> v(3);
	CHECK_EQ(v.size(), three);
	CHECK_GE(three, v.size());
	int *p = nullptr;
	CHECK_EQ(p, 0);
	CHECK_EQ(p, nullptr);
	CHECK_NE(&three, nullptr);
	w = Thrown([&] { CHECK_NE(p, nullptr); });
	Expect(Has(w, "Check failed: p != nullptr (0 vs. nullptr) ") ||
		       Has(w, "Check failed: p != nullptr ((nil) vs. nullptr) "),
	       "CHECK_NE on a null pointer: " + w);
	std::unique_ptr<int> up(new int(5));
	CHECK_NE(up, nullptr);
	Colour c = Colour::RED;
	w = Thrown([&] { CHECK_EQ(c, Colour::GREEN); });
	Expect(Has(w, "Check failed: c == Colour::GREEN (1 vs. 7) "), "enum class as numbers: " + w);
	Opaque o1{1}, o2{2};
	w = Thrown([&] { CHECK_EQ(o1, o2); });
	Expect(Has(w, "Check failed: o1 == o2 ((unprintable) vs. (unprintable)) "),
	       "values without operator<<: " + w);
	std::map<int, int> mp;
	CHECK_EQ(mp.find(1), mp.end());

	/* an else after a check belongs to the caller's if */
	bool took_else = false;
	if (three == 4)
		CHECK_EQ(three, 4);
	else
		took_else = true;
	Expect(took_else, "if (...) CHECK_EQ(...); else ...: the else is the if's");

	/* DCHECK_* (no NDEBUG here): checked, with values */
	w = Thrown([&] { DCHECK_EQ(three, four) << "d"; });
	Expect(Has(w, "Check failed: three == four (3 vs. 4) d"), "DCHECK_EQ: " + w);
	w = Thrown([&] { DCHECK(three == four); });
	Expect(Has(w, "Check failed: three == four"), "DCHECK: " + w);
	w = Thrown([&] { LOG(DFATAL) << "dfatal"; });
	Expect(Has(w, "dfatal"), "LOG(DFATAL) is fatal without NDEBUG: " + w);

	/* CHECK_NOTNULL returns its value, evaluated once */
	int calls = 0;
	auto ptr = [&]() -> int * {
		calls++;
		return &three;
	};
	Expect(CHECK_NOTNULL(ptr()) == &three && calls == 1, "CHECK_NOTNULL: value, once");
	w = Thrown([&] { CHECK_NOTNULL(p); });
	Expect(Has(w, "notnull: p"), "CHECK_NOTNULL(nullptr): " + w);
}

void Children()
{
	Child c = Run("check_eq");
	Expect(Aborted(c), "an uncaught failed CHECK_EQ ends the process with SIGABRT (status " +
				   std::to_string(c.status) + ")");
	Expect(Has(c.err, "ERROR: check_test.cc:") &&
		       Has(c.err, "Check failed: a == 4 (3 vs. 4) the answer is 42"),
	       "the failed CHECK_EQ's line on stderr: " + c.err);
	c = Run("check");
	Expect(Aborted(c) && Has(c.err, "Check failed: !v.empty() need one value"),
	       "an uncaught failed CHECK: " + c.err);
	c = Run("log_fatal");
	Expect(Aborted(c) && Has(c.err, "ERROR: check_test.cc:") && Has(c.err, "given up"),
	       "LOG(FATAL): " + c.err);

	c = Run("log_lines", {"PS_VERBOSE=2"});
	Expect(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "the logging child exits 0");
	Expect(Has(c.err, "INFO: check_test.cc:") && Has(c.err, "info line"), "LOG(INFO): " + c.err);
	Expect(Has(c.err, "WARN: check_test.cc:") && Has(c.err, "warning line"), "LOG(WARNING)");
	Expect(Has(c.err, "ERROR: check_test.cc:") && Has(c.err, "error line") &&
		       Has(c.err, "ll line"),
	       "LOG(ERROR), LL");
	Expect(Has(c.err, "log_if true") && !Has(c.err, "log_if false"), "LOG_IF");
	Expect(Has(c.err, "vlog one") && Has(c.err, "vlog two") && !Has(c.err, "vlog three"),
	       "PS_VLOG(n) with PS_VERBOSE=2");
	Expect(Has(c.err, "dmlc vlog two") && !Has(c.err, "dmlc vlog three"),
	       "VLOG(n) with PS_VERBOSE=2");
	Expect(Has(c.err, "dlog line"), "DLOG without NDEBUG");
	c = Run("log_lines", {"PS_VERBOSE="});
	Expect(!Has(c.err, "vlog one") && Has(c.err, "info line"), "PS_VLOG(1) without PS_VERBOSE");
}

} // namespace

int main(int argc, char **argv)
{
	if (argc > 1) {
		std::string mode = argv[1];
		if (mode == "check_eq")
			return ChildCheckEq();
		if (mode == "check")
			return ChildCheck();
		if (mode == "log_fatal")
			return ChildLogFatal();
		if (mode == "log_lines")
			return ChildLogLines();
		return 2;
	}
	Comparisons();
	Children();
	return ExpectReport();
}
