// The interpreter kolo-bench's PyTorch peers run in, for the tests that
// run them: what the build was configured with (kolo_bench.cmake passes
// KOLO_TEST_PYTHON from the cache variable KOLO_PYTHON, which
// scripts/setup.sh sets to the project's .venv/bin/python; without it the
// system's python3, as kolo-bench's own FindPython falls back to).
#ifndef KOLO_TESTS_TOOLS_KOLO_BENCH_PEER_PYTHON_TESTING_H_
#define KOLO_TESTS_TOOLS_KOLO_BENCH_PEER_PYTHON_TESTING_H_

#include <cstdlib>
#include <string>

#ifndef KOLO_TEST_PYTHON
#error "KOLO_TEST_PYTHON must come from tests/tools/kolo-bench/kolo_bench.cmake"
#endif

namespace kolo::testing {

inline std::string PeerPython() { return KOLO_TEST_PYTHON; }

// Whether PeerPython() imports torch; a test that needs it says so with
// KOLO_REQUIRE_OR_SKIP(PeerPythonHasTorch(), PeerTorchRequirement()).
inline bool PeerPythonHasTorch() {
  const std::string probe =
      "'" + PeerPython() + "' -c 'import torch' >/dev/null 2>&1";
  return std::system(probe.c_str()) == 0;
}

// What such a test is missing, for its skip (or its failure under CI).
inline std::string PeerTorchRequirement() {
  return "torch in " + PeerPython() +
         " (scripts/setup.sh makes the project's .venv with it)";
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TOOLS_KOLO_BENCH_PEER_PYTHON_TESTING_H_
