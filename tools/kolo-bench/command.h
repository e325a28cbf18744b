// What a kolo-bench subcommand is made of. Each has a header declaring its
// flags (a struct, filled by CLI11), AddXCommand (registers the subcommand
// and its flags under kolo-bench's app) and the function main() runs once
// it is parsed, whose Status becomes the exit code through CommandExit.
// This file declares CLI11's App for those headers and holds what the
// subcommands share: the exit code, and the flags every measuring command
// has.
#ifndef KOLO_TOOLS_KOLO_BENCH_COMMAND_H_
#define KOLO_TOOLS_KOLO_BENCH_COMMAND_H_

#include <cstdint>
#include <string>

#include "kolo/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kolo::bench {

// A command's exit code: 0 when `status` is Ok, else 1 after
// "kolo-bench <command>: <message>" on stderr.
int CommandExit(const char* command, const Status& status);

// The flags the measuring commands share, in the order --help lists them:
// --threads (LibTorch threads per `unit`: "worker", "rank"), for timed jobs
// (`warmup` and `iters` given) --warmup and --iters, then --repeat, which
// `repeat_help` describes.
void AddJobFlags(CLI::App* cmd, int32_t* threads, const char* unit,
                 int64_t* warmup, int64_t* iters, int32_t* repeat,
                 const char* repeat_help);

// --dataset (synthetic, fashion-mnist, mnist or cifar10) and --data-dir,
// for the commands whose jobs train on a dataset as kolo-train does.
void AddDatasetFlags(CLI::App* cmd, std::string* dataset,
                     std::string* data_dir);

// Flags several commands take, registered here so that they read the same
// in every command's --help: --np (worker counts), --models (model zoo
// networks), --image-size (of synthetic 3-channel images) and --kolorun
// (the launcher of kolo's jobs; empty: the one beside kolo-bench).
void AddNpFlag(CLI::App* cmd, std::string* np);
void AddModelsFlag(CLI::App* cmd, std::string* models);
void AddImageSizeFlag(CLI::App* cmd, int64_t* image_size);
void AddKolorunFlag(CLI::App* cmd, std::string* kolorun);

// NAME (CLI11's form: "--write-bytes", "-b,--minbytes") SIZE: a byte count, plain or with a K, M or G suffix (powers of
// 1024), parsed into `bytes`; a bad size fails the command line's parse,
// naming the flag. --help shows the default as it would be typed ("4K").
void AddByteSizeFlag(CLI::App* cmd, const std::string& name, int64_t* bytes,
                     const std::string& help);

// --json FILE: where a command appends its record.
void AddRecordFlag(CLI::App* cmd, std::string* json_path);
// --json FILE for the commands that measure inside one kolo job
// (collectives, link): where its rank 0 appends the record.
void AddRankZeroRecordFlag(CLI::App* cmd, std::string* json_path);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_COMMAND_H_
