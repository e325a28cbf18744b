// The pieces every kolo-bench subcommand shares: the exit code of a
// Status, and the flags registered once for several commands.
#include "command.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kolo::bench {
namespace {

TEST(CommandExitTest, OkIsZeroAndAnErrorIsOne) {
  EXPECT_EQ(CommandExit("zero", Status::Ok()), 0);
  testing::internal::CaptureStderr();
  EXPECT_EQ(CommandExit("zero", InvalidArgument("--np is empty")), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "kolo-bench zero: --np is empty\n");
}

// Parses `args` (after the program's name) into a command with `add`'s
// flags; false when CLI11 rejects them.
template <typename Add>
bool Parse(std::vector<std::string> args, Add add) {
  CLI::App app;
  add(&app);
  args.insert(args.begin(), "kolo-bench");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return false;
  }
  return true;
}

TEST(AddByteSizeFlagTest, TakesSuffixesAndNamesTheFlagOfABadSize) {
  int64_t bytes = 4096;
  CLI::App app;
  AddByteSizeFlag(&app, "-b,--minbytes", &bytes, "smallest size");
  EXPECT_NE(app.help().find("4K"), std::string::npos) << app.help();
  const auto add = [&](CLI::App* app) {
    AddByteSizeFlag(app, "-b,--minbytes", &bytes, "smallest size");
  };
  ASSERT_TRUE(Parse({"--minbytes", "3M"}, add));
  EXPECT_EQ(bytes, 3 << 20);
  ASSERT_TRUE(Parse({"-b", "100"}, add));
  EXPECT_EQ(bytes, 100);
  try {
    app.parse("--minbytes lots", /*program_name_included=*/false);
    ADD_FAILURE() << "a bad size parsed";
  } catch (const CLI::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("--minbytes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(bytes, 100);
}

TEST(AddDatasetFlagsTest, TakesAKnownDatasetAndItsDirectory) {
  std::string dataset = "synthetic";
  std::string data_dir;
  const auto add = [&](CLI::App* app) {
    AddDatasetFlags(app, &dataset, &data_dir);
  };
  ASSERT_TRUE(Parse({"--dataset", "cifar10", "--data-dir", "/data"}, add));
  EXPECT_EQ(dataset, "cifar10");
  EXPECT_EQ(data_dir, "/data");
  EXPECT_FALSE(Parse({"--dataset", "imagenet"}, add));
}

TEST(AddJobFlagsTest, WarmupAndItersOnlyForTimedJobs) {
  int32_t threads = 1;
  int64_t warmup = 0;
  int64_t iters = 0;
  int32_t repeat = 3;
  ASSERT_TRUE(Parse(
      {"--threads", "4", "--warmup", "2", "--iters", "9", "--repeat", "5"},
      [&](CLI::App* app) {
        AddJobFlags(app, &threads, "worker", &warmup, &iters, &repeat,
                    "jobs per configuration");
      }));
  EXPECT_EQ(threads, 4);
  EXPECT_EQ(warmup, 2);
  EXPECT_EQ(iters, 9);
  EXPECT_EQ(repeat, 5);
  EXPECT_FALSE(Parse({"--warmup", "2"}, [&](CLI::App* app) {
    AddJobFlags(app, &threads, "rank", nullptr, nullptr, &repeat,
                "saves and loads per configuration");
  }));
}

}  // namespace
}  // namespace kolo::bench
