// kolorun's command line:
//
//   kolorun -np N [--backend shm|gloo|mpi] [--launcher kolorun|mpirun]
//           [--bind-to core|none] [--env K=V]... [--timeout S]
//           [--timeline-filename F]
//           [--mpi-args "..."] [--verbose] [--] program args...
//
// The backend is what kolo's runtime runs on; the launcher is what starts
// the ranks. They are separate because a job may want MPI's world without
// MPI's engine: kolo-bench collectives --peer mpi times raw MPI beside kolo
// on shm, which needs ranks started by mpirun.
//
// Everything up to the program belongs to kolorun; the program and every
// argument after it go to the workers untouched, so `kolorun -np 2 prog -np 3`
// hands `-np 3` to prog.
#ifndef KOLO_TOOLS_KOLORUN_OPTIONS_H_
#define KOLO_TOOLS_KOLORUN_OPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/status.h"
#include "kolo_internal/config.h"

namespace kolo {
namespace kolorun {

// The exit status for a command line kolorun cannot use, as getopt-style
// tools and CLI11 return it.
inline constexpr int kUsageExitCode = 2;

// Who starts the ranks.
enum class LauncherKind : int32_t {
  kKolorun = 0,  // kolorun forks each rank itself
  kMpirun,       // one mpirun starts them all (MPI can then be initialized)
};

// "kolorun", "mpirun".
const char* LauncherName(LauncherKind kind);

// Where the ranks kolorun starts may run.
enum class BindTo : int32_t {
  kCore = 0,  // each rank its own block of cores, when there are enough
  kNone,      // anywhere, as the scheduler likes
};

struct LaunchOptions {
  bool help = false;  // --help: print Usage() and do nothing else
  int32_t num_ranks = 0;
  // kolorun starts every rank on this host, where shared memory is fastest.
  BackendKind backend = BackendKind::kShm;
  // --launcher; without it mpirun for the mpi backend, kolorun otherwise.
  LauncherKind launcher = LauncherKind::kKolorun;
  // --env K=V in the order given; a later K overrides an earlier one.
  std::vector<std::pair<std::string, std::string>> env;
  int64_t timeout_seconds = kDefaultTimeout.count();
  // --bind-to (kolorun's launcher only); without it kCore, but kNone for
  // --backend gloo.
  BindTo bind_to = BindTo::kCore;
  bool verbose = false;
  std::string timeline_path;  // --timeline-filename: KOLO_TIMELINE
  std::vector<std::string>
      mpi_args;                      // --mpi-args (mpirun), split on whitespace
  std::vector<std::string> command;  // program and its arguments
};

// The text --help prints.
std::string Usage();

// Parses argv (argv[0] is kolorun itself). `env` is kolorun's own
// environment, which supplies the default backend (KOLO_BACKEND). Every error
// is kInvalidArgument and its message names the flag or value at fault; the
// caller prints it and exits with kUsageExitCode.
StatusOr<LaunchOptions> ParseOptions(const std::vector<std::string>& argv,
                                     const EnvLookup& env);

// Splits `text` on runs of spaces and tabs, dropping empty pieces.
std::vector<std::string> SplitOnWhitespace(const std::string& text);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_OPTIONS_H_
