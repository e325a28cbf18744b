// kolo-bench soak: chaos against real jobs on a cluster of network
// namespaces, for a given time.
//
//   kolo-bench soak [--seconds 600] [--seed S] [--mean-gap 20] [--np 2]
//                   [--job-timeout 300] [--json FILE]
//
// Needs root (it makes namespaces, scripts/netns_cluster.sh). On a cluster
// of three hosts it keeps two jobs running, each started again whenever it
// ends:
//   - elastic: kolorun --elastic -np N --min-np 1 over h1..h3 with
//     kolo-train --elastic (lenet on Fashion-MNIST, 1 thread);
//   - static: kolorun -H h2:1,h3:1 with kolo-train, which a lost worker
//     ends: it must fail fast and name the rank or host it lost.
// Into them it injects faults at random times (soak_plan.h, from --seed,
// printed so that a run can be repeated): kill -9 of a worker, SIGSTOP and
// later SIGCONT of a worker, h2's or h3's link down and later up, garbage
// connections from another host to a kolorun's store and to a worker's
// engine port (which listens only while a mesh forms, for well under a
// millisecond: the fault waits up to 45 s for a static job to start and
// holds its rank 1 stopped for up to 3 s, so that rank 0 listens for it).
// Both drivers run in h1, whose link stays up.
// At the end it stops the faults, lets the jobs finish, and counts what
// is left: processes of the jobs, namespaces, shm segments.
//
// It prints a line per fault and per job ended, then a table: faults by
// kind (injected, skipped for want of a target), and per job kind the runs,
// their outcomes, recoveries (elastic rounds that resumed training), steps
// lost, and how many successes showed their parameters equal on every
// rank. Exit status 0 only when no job hung, nothing is left, every failure
// named its cause and every success showed equal parameters. Ctrl-C (or
// SIGTERM) stops the jobs, still counts and cleans up, and exits 1.
#ifndef KOLO_TOOLS_KOLO_BENCH_SOAK_H_
#define KOLO_TOOLS_KOLO_BENCH_SOAK_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "kolo/status.h"

namespace kolo::bench {

struct SoakFlags {
  double seconds = 600;
  int64_t seed = -1;  // -1: drawn, and printed
  double mean_gap = 20;
  double job_timeout = 300;
  int32_t np = 2;
  int32_t garbage_connections = 20;
  std::string model = "lenet";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int64_t epochs = 6;
  int64_t batch_size = 32;
  int64_t train_subset = 16384;
  int64_t test_subset = 1000;
  int64_t commit_every = 5;
  std::string kolorun;     // default: beside kolo-bench
  std::string kolo_train;  // default: beside kolo-bench
  std::string cluster_script;
  std::string json_path;
};

CLI::App* AddSoakCommand(CLI::App& app, SoakFlags* flags);

// What `kolo-bench soak` runs: the soak, its table, and its record
// (appended to flags.json_path when set). kFailedPrecondition when not
// root; kAborted when interrupted; kInternal listing the problems (hangs,
// leftovers, unnamed failures) when the soak found any.
StatusOr<nlohmann::json> RunSoak(const SoakFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_SOAK_H_
