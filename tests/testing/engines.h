// The collective engines this build has, for tests parameterised over
// engines: shm and tcp are always built, gloo and mpi only with
// KOLO_WITH_GLOO / KOLO_WITH_MPI. A test instantiates only the cases whose
// engine is built, so a build without Gloo or MPI has no such cases (rather
// than skipped ones, which fail under CI), and a full build keeps every
// case under its usual name:
//
//   INSTANTIATE_TEST_SUITE_P(Engines, PointToPointEngineTest,
//       ::testing::ValuesIn(BuiltEngines({"shm", "tcp", "gloo", "mpi"})));
//   INSTANTIATE_TEST_SUITE_P(Worlds, CollectivesMatrixTest,
//       ::testing::ValuesIn(OnBuiltEngines(
//           {MatrixCase{"gloo", 2}, MatrixCase{"tcp", 2}},
//           &MatrixCase::backend)));
//
// Tests that only need "a network engine" take NetworkEngine(): Gloo where
// built, kolo's own tcp engine otherwise (as src/common/config.cc does).
#ifndef KOLO_TESTS_TESTING_ENGINES_H_
#define KOLO_TESTS_TESTING_ENGINES_H_

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "kolo/build_info.h"
#include "kolo/options.h"

namespace kolo::testing {

inline bool EngineBuilt(const std::string& engine) {
  return BuildInfo().HasEngine(engine);
}

// The cases whose engine, engine_of(case) (a function or a pointer to a
// member), this build has, in their order.
template <typename Case, typename EngineOf>
std::vector<Case> OnBuiltEngines(std::initializer_list<Case> cases,
                                 EngineOf engine_of) {
  std::vector<Case> built;
  for (const Case& c : cases) {
    if (EngineBuilt(std::invoke(engine_of, c))) built.push_back(c);
  }
  return built;
}

// The engines of `wanted` this build has, in their order.
inline std::vector<const char*> BuiltEngines(
    std::initializer_list<const char*> wanted) {
  return OnBuiltEngines(wanted, [](const char* engine) { return engine; });
}

// The job secret of tests whose ranks are threads: the tcp engine admits
// only ranks that prove one (transport/tcp_mesh.h), as a real job's do with
// KOLO_STORE_SECRET.
inline constexpr char kTestJobSecret[] = "the job secret of kolo's tests";

// Gloo where built, else kolo's tcp engine.
inline BackendKind NetworkEngine() {
  return EngineBuilt("gloo") ? BackendKind::kGloo : BackendKind::kTcp;
}
inline const char* NetworkEngineName() {
  return EngineBuilt("gloo") ? "gloo" : "tcp";
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_ENGINES_H_
