#include "command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <utility>

#include "kolo_internal/config.h"

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

void AddNpFlag(CLI::App* cmd, std::string* np) {
  cmd->add_option("--np", *np, "worker counts, comma-separated")
      ->capture_default_str();
}

void AddModelsFlag(CLI::App* cmd, std::string* models) {
  cmd->add_option("--models", *models, "model zoo networks, comma-separated")
      ->capture_default_str();
}

void AddImageSizeFlag(CLI::App* cmd, int64_t* image_size) {
  cmd->add_option("--image-size", *image_size,
                  "the synthetic 3-channel images' height and width")
      ->capture_default_str();
}

void AddKolorunFlag(CLI::App* cmd, std::string* kolorun) {
  cmd->add_option("--kolorun", *kolorun, "kolorun to start kolo's jobs with");
}

namespace {

// `bytes` as AddByteSizeFlag reads it: the largest suffix that divides it.
std::string ByteSizeText(int64_t bytes) {
  constexpr std::pair<int64_t, char> kSuffixes[] = {{int64_t{1} << 30, 'G'},
                                                    {int64_t{1} << 20, 'M'},
                                                    {int64_t{1} << 10, 'K'}};
  for (const auto& [unit, suffix] : kSuffixes) {
    if (bytes != 0 && bytes % unit == 0) {
      return std::to_string(bytes / unit) + suffix;
    }
  }
  return std::to_string(bytes);
}

}  // namespace

void AddByteSizeFlag(CLI::App* cmd, const std::string& name, int64_t* bytes,
                     const std::string& help) {
  // CLI11's name may list a short form first: "-b,--minbytes".
  const std::string flag = name.substr(name.rfind(',') + 1);
  cmd->add_option_function<std::string>(
         name,
         [bytes, flag](const std::string& text) {
           StatusOr<int64_t> parsed = ParseByteSize(text, flag);
           if (!parsed.ok()) {
             throw CLI::ValidationError(flag, parsed.status().message());
           }
           *bytes = *parsed;
         },
         help)
      ->type_name("SIZE")
      ->default_str(ByteSizeText(*bytes));
}

void AddRecordFlag(CLI::App* cmd, std::string* json_path) {
  cmd->add_option("--json", *json_path,
                  "append the record (every figure, every job's JSON) here");
}

void AddRankZeroRecordFlag(CLI::App* cmd, std::string* json_path) {
  cmd->add_option("--json", *json_path,
                  "Append the results as a JSON record to the array in this "
                  "file (rank 0)");
}

}  // namespace kolo::bench
