#include "command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

namespace kolo::bench {

int CommandExit(const char* command, const Status& status) {
  if (status.ok()) return 0;
  fmt::print(stderr, "kolo-bench {}: {}\n", command, status.message());
  return 1;
}

void AddJobFlags(CLI::App* cmd, int32_t* threads, const char* unit,
                 int64_t* warmup, int64_t* iters, int32_t* repeat,
                 const char* repeat_help) {
  cmd->add_option("--threads", *threads,
                  fmt::format("LibTorch threads per {}", unit))
      ->capture_default_str();
  if (warmup != nullptr && iters != nullptr) {
    cmd->add_option("--warmup", *warmup, "untimed steps before the timed ones")
        ->capture_default_str();
    cmd->add_option("--iters", *iters, "timed steps per job")
        ->capture_default_str();
  }
  cmd->add_option("--repeat", *repeat, repeat_help)->capture_default_str();
}

void AddDatasetFlags(CLI::App* cmd, std::string* dataset,
                     std::string* data_dir) {
  cmd->add_option("--dataset", *dataset,
                  "synthetic, fashion-mnist, mnist or cifar10")
      ->check(CLI::IsMember({"synthetic", "fashion-mnist", "mnist", "cifar10"}))
      ->capture_default_str();
  cmd->add_option("--data-dir", *data_dir, "where the dataset's files are");
}

void AddRecordFlag(CLI::App* cmd, std::string* json_path) {
  cmd->add_option("--json", *json_path,
                  "append the record (every figure, every job's JSON) here");
}

}  // namespace kolo::bench
