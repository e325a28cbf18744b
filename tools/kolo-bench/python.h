// kolo-bench python: one Python training script
// (examples/python/synthetic_benchmark.py) under kolo.torch (kolorun),
// PyTorch DDP (torchrun) and Horovod (horovodrun --gloo), and as plain
// PyTorch in one process, in one run: LeNet at batch 128 on Fashion-MNIST
// and ResNet-18 at batch 32 on synthetic images, at each --np. Beside it,
// what a small allreduce costs from Python (bench/python/allreduce_latency.py
// under kolorun --backend shm) and from C++ (kolo-bench collectives, the
// same size, the same way of timing).
//
// Every framework's job of a configuration runs once per repeat, one
// repeat through all jobs before the next, so that the machine's drift
// hits every framework alike; the table gives medians over the repeats and
// kolo's images/s over each other framework's. The script gives each rank
// the cores divided by the ranks on the host as torch threads, whatever
// launched it (torchrun would give one, kolorun and horovodrun all).
//
// Horovod runs from its own interpreter, --horovod-python (default:
// .venv-horovod/bin/python at the source root, which
// scripts/setup_horovod.sh makes), with horovodrun beside it; where there
// is none, its rows say so and nothing stands in for them.
//
// --json FILE appends one record ({"benchmark": "python", ...}: the
// configuration, every row with the torch its side ran, the latency rows)
// for kolo-bench report.
#ifndef KOLO_TOOLS_KOLO_BENCH_PYTHON_H_
#define KOLO_TOOLS_KOLO_BENCH_PYTHON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "kolo/status.h"

namespace kolo::bench {

struct PythonFlags {
  std::string models = "lenet,resnet18";
  std::string np = "1,2";
  std::string frameworks = "kolo,ddp,horovod,none";
  // synthetic_benchmark.py's --num-warmup-batches, --num-batches-per-iter
  // and --num-iters.
  int64_t warmup = 5;
  int64_t batches_per_iter = 10;
  int64_t iters = 5;
  int32_t threads = 0;  // the script's --threads; 0: cores / local ranks
  int32_t repeat = 3;
  int64_t latency_bytes = 4096;
  int64_t latency_iters = 2000;
  bool quick = false;
  std::string kolorun;
  std::string python;
  std::string horovod_python;
  std::string json_path;
};

CLI::App* AddPythonCommand(CLI::App& app, PythonFlags* flags);

// What `kolo-bench python` runs: every job, the tables, the record appended
// to flags.json_path (when set), which it returns.
StatusOr<nlohmann::json> RunPythonStudy(const PythonFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_PYTHON_H_
