// The SignalWatcher of a kolorun unit test program. One for the whole
// program: it blocks SIGCHLD, SIGINT and SIGTERM, and a second one would
// hand the blocked mask on to the children.
#ifndef KOLO_TESTS_TOOLS_KOLORUN_TEST_SIGNALS_H_
#define KOLO_TESTS_TOOLS_KOLORUN_TEST_SIGNALS_H_

#include <utility>

#include "gtest/gtest.h"
#include "process.h"

namespace kolo {
namespace kolorun {

inline SignalWatcher* TestSignals() {
  static SignalWatcher* signals = [] {
    StatusOr<SignalWatcher> created = SignalWatcher::Create();
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return new SignalWatcher(*std::move(created));
  }();
  return signals;
}

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TESTS_TOOLS_KOLORUN_TEST_SIGNALS_H_
