// The tally of the C++ test programs that need no job (check_test,
// api_test): Expect counts a check and prints one line for a failed one;
// ExpectReport prints the summary and gives the exit status. Define
// EXPECT_PROGRAM (the program's name, which starts its lines) first.
#ifndef PSL_TESTS_CXX_EXPECT_H
#define PSL_TESTS_CXX_EXPECT_H

#include <cstdio>
#include <string>

#ifndef EXPECT_PROGRAM
#error "define EXPECT_PROGRAM before including expect.h"
#endif

namespace {

int failures = 0, checks = 0;

void Expect(bool ok, const std::string &what)
{
	checks++;
	if (!ok) {
		failures++;
		std::printf(EXPECT_PROGRAM ": FAILED: %s\n", what.c_str());
	}
}

/* 0, "PROGRAM: OK (N checks)"; or 1, "PROGRAM: F of N checks failed" */
int ExpectReport()
{
	if (failures) {
		std::printf(EXPECT_PROGRAM ": %d of %d checks failed\n", failures, checks);
		return 1;
	}
	std::printf(EXPECT_PROGRAM ": OK (%d checks)\n", checks);
	return 0;
}

} // namespace

#endif
