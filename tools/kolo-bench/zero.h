// kolo-bench zero: what ZeRO's sharding saves per rank, and what it costs in
// throughput, against kolo's DistributedOptimizer and PyTorch's
// ZeroRedundancyOptimizer and FSDP2.
//
//   kolo-bench zero [--models resnet50] [--np 1,2,4]
//       [--variants kolo-ddp,kolo-zero1,kolo-zero2,torch-zero,torch-fsdp2]
//       [--optimizer adam] [--precision fp32] [--batch-size 32]
//       [--warmup 2] [--iters 10] [--repeat 3] [--json FILE]
//
// Variants, each a job started the way a user would (kolo-bench train's
// TrainCommand, so the same model, data, batch and threads):
//
//   kolo-ddp    kolorun -np N kolo-train --zero-stage 0: DistributedOptimizer,
//               every gradient allreduced, every rank a whole optimizer
//   kolo-zero1  --zero-stage 1: the optimizer state sharded over the ranks
//   kolo-zero2  --zero-stage 2: the optimizer state and the gradients
//   torch-ddp   torch_ddp.py --np N: PyTorch DDP with a whole optimizer
//   torch-zero  torch_ddp.py --zero: DDP with ZeroRedundancyOptimizer
//               (PyTorch's ZeRO-1)
//   torch-fsdp2 torch_ddp.py --fsdp2: FSDP2 (fully_shard, torch 2.6 and
//               later), PyTorch's ZeRO-3: parameters, gradients and
//               optimizer state sharded, each residual block its own unit
//
// The torch variants run in the project's Python (peer_python.h), on the
// torch kolo's LibTorch came from; the table's last line names both.
//
// Each job times --iters steps after --warmup untimed ones and reports, per
// rank, the bytes of its optimizer state, the most bytes of gradient storage
// it held at once (kolo: communication buckets included; torch: the .grad
// tensors, DDP's bucket copies being invisible from Python, FSDP2's local
// shards of them) and its master weights. Repeats cycle through every configuration in turn, as in
// kolo-bench train, and the table gives medians over them.
//
// The table: per model, worker count and variant, images/s, step time, the
// largest rank's optimizer state and gradients in MiB, their sum as a
// fraction of the same model's kolo-ddp sum at the same worker count (the
// issue's target for ZeRO-2 at np 4 is at most 1/3), the largest rank's
// peak RSS, and images/s over kolo-ddp's. Memory is measured by the jobs,
// never computed from the parameter count.
//
// Checks: a job that fails, or whose JSON lacks result.memory with one
// figure per rank, or whose config.zero_stage is not the one asked for, is
// an error that quotes the job's output, and kolo-bench exits 1. A torch
// variant whose interpreter cannot import torch gets a row saying so;
// nothing is estimated in its place. --precision fp16 reaches the torch
// variants only where their torch has CPU float16 autocast (2.x).
//
// --json FILE appends one record ({"benchmark": "zero", ...}: the
// configuration, the environment, every row with the torch its side ran
// and every job's JSON) for kolo-bench report.
#ifndef KOLO_TOOLS_KOLO_BENCH_ZERO_H_
#define KOLO_TOOLS_KOLO_BENCH_ZERO_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/status.h"
#include "table.h"
#include "train.h"

namespace kolo::bench {

struct ZeroFlags : TimedJobFlags {
  ZeroFlags() {
    warmup = 2;
    iters = 10;
  }
  std::string models = "resnet50";
  std::string np = "1,2,4";
  std::string variants =
      "kolo-ddp,kolo-zero1,kolo-zero2,torch-zero,torch-fsdp2";
  std::string optimizer = "adam";
  double lr = 1e-3;
  std::string precision = "fp32";
  std::string dataset = "synthetic";
  std::string data_dir;
  std::string json_path;
  std::string kolorun;     // empty: found next to kolo-bench
  std::string kolo_train;  // empty: found next to kolo-bench
  std::string ddp_script;  // empty: the installed or source-tree script
  std::string python;      // empty: FindPython's default (peer_python.h)
};

// One variant of a --variants list: which program runs it and at which
// ZeRO stage.
struct ZeroVariant {
  std::string name;        // "kolo-zero2"
  std::string framework;   // "kolo" or "torch-ddp", as TrainCommand names it
  int32_t zero_stage = 0;  // 3: FSDP2, which shards the parameters too
};

// The variants of `text` in the order given, duplicates dropped;
// kInvalidArgument naming --variants and the first unknown item.
StatusOr<std::vector<ZeroVariant>> ParseZeroVariants(const std::string& text);

// The command line of one job: `variant` of `model` at `np` workers, its
// JSON written to `json_path`.
std::vector<std::string> ZeroCommand(const ZeroFlags& flags,
                                     const ZeroVariant& variant,
                                     const std::string& model, int32_t np,
                                     const TrainTools& tools,
                                     const std::string& json_path);

// What one job measured.
struct ZeroMeasurement {
  double images_per_second = 0;
  double step_ms = 0;
  // One entry per rank.
  std::vector<int64_t> optimizer_state_bytes;
  std::vector<int64_t> gradient_bytes;
  std::vector<int64_t> master_weight_bytes;
  std::vector<int64_t> peak_rss_bytes;
};

// Reads one job's JSON (`job`, with `output` what it printed). kInternal
// naming the field and quoting the last lines of `output` when
// images_per_second or step_ms is missing or not positive, when a
// result.memory field is missing or has other than `np` non-negative
// integers, or when config.zero_stage is missing or not `variant`'s stage.
StatusOr<ZeroMeasurement> ReadZeroMeasurement(const nlohmann::json& job,
                                              const std::string& output,
                                              const ZeroVariant& variant,
                                              int32_t np);

// One line of the table: medians over the repeats of the largest rank's
// figures, and the comparison with kolo-ddp.
struct ZeroRow {
  std::string model;
  int32_t np = 0;
  std::string variant;
  double images_per_second = 0;
  double step_ms = 0;
  double optimizer_state_bytes = 0;  // the largest rank's
  double gradient_bytes = 0;         // the largest rank's
  double master_weight_bytes = 0;    // the largest rank's
  double peak_rss_bytes = 0;         // the largest rank's
  // (optimizer state + gradients) over the same model's kolo-ddp figure at
  // the same np, and images/s over kolo-ddp's; empty without kolo-ddp.
  std::optional<double> memory_fraction;
  std::optional<double> throughput_ratio;
};

// The row of `variant` from its repeats' measurements (at least one).
ZeroRow SummarizeZero(const std::string& model, int32_t np,
                      const std::string& variant,
                      const std::vector<ZeroMeasurement>& repeats);

// Fills every row's memory_fraction and throughput_ratio from the kolo-ddp
// row of the same model and np (kolo-ddp's own: 1 and 1).
void CompareWithKoloDdp(std::vector<ZeroRow>* rows);

// The table's columns, and one row's cells.
Table ZeroTable();
std::vector<std::string> ZeroCells(const ZeroRow& row);

CLI::App* AddZeroCommand(CLI::App& app, ZeroFlags* flags);

// What `kolo-bench zero` runs: every job, the table, the record appended to
// flags.json_path (when set), which it returns.
StatusOr<nlohmann::json> RunZero(const ZeroFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_ZERO_H_
