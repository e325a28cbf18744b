// Timing assertions that hold on two loaded cores and under the sanitizers.
//
// Two kinds of bound, each with a margin that no scheduler delay reaches:
//
// - A wait that ends at its timeout cannot end early, so it is checked
//   from below exactly; from above it is allowed kSchedulingSlack past the
//   timeout, how late a woken thread may run on a loaded machine.
// - A call that must fail fast (a peer is gone, the link was aborted)
//   rather than wait for its timeout is given kFastFailTimeout and must
//   return within kFastFailBound, half of it: a call that waited for the
//   timeout fails the bound, and no delay of the machine's comes near it.
//
// How fast something is, as a figure, is a benchmark's (kolo-bench), not
// a test's.
#ifndef KOLO_TESTS_TESTING_TIMING_H_
#define KOLO_TESTS_TESTING_TIMING_H_

#include <chrono>

namespace kolo::testing {

inline constexpr std::chrono::milliseconds kSchedulingSlack{5000};
inline constexpr std::chrono::milliseconds kFastFailTimeout{20000};
inline constexpr std::chrono::milliseconds kFastFailBound =
    kFastFailTimeout / 2;

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_TIMING_H_
