// Tests that need something from outside kolo (a Debian package, a data
// set, mpirun) state it with KOLO_REQUIRE_OR_SKIP(present, what):
//
//   KOLO_REQUIRE_OR_SKIP(HaveFashionMnist(), "Fashion-MNIST
//   (dataset-fashion-mnist)");
//
// Where it is missing, the test is skipped, and ctest reports it as
// skipped with `what` as the reason. Under CI (CI=true), where
// scripts/setup.sh installed everything, a missing requirement is a
// failure instead: a skip there would hide a broken setup.
// Like GTEST_SKIP and FAIL, it returns from the function it is used in.
#ifndef KOLO_TESTS_TESTING_REQUIREMENTS_H_
#define KOLO_TESTS_TESTING_REQUIREMENTS_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace kolo::testing {

inline bool UnderCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

}  // namespace kolo::testing

#define KOLO_REQUIRE_OR_SKIP(present, what)                              \
  if (present) {                                                         \
  } else if (::kolo::testing::UnderCi()) {                               \
    FAIL() << "missing under CI (CI=true), where it must be installed: " \
           << what;                                                      \
  } else                                                                 \
    GTEST_SKIP() << "missing: " << what

#endif  // KOLO_TESTS_TESTING_REQUIREMENTS_H_
