// kolo-train: data-parallel training of kolo's model zoo, one process per
// worker under a launcher:
//
//   kolorun -np 2 kolo-train --model lenet --dataset fashion-mnist
//       --epochs 5 --batch-size 128 --lr 0.01 --json result.json
//
// Without a launcher it trains as a one-worker world. Exit status: 0 when
// training finished, 1 for any error (bad flag, missing data, a failed
// rank), after one line on stderr saying what failed.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "config_file.h"
#include "flags.h"
#include "kolo/build_info.h"
#include "kolo/kolo.h"
#include "kolo_internal/config.h"
#include "trainer.h"

namespace {

// Every rank parses the same command line and fails alike before the job
// forms; only rank 0 (or a process whose rank cannot be told) says so.
bool PrintsCommandLineErrors() {
  kolo::StatusOr<kolo::InitOptions> config =
      kolo::InitOptions::FromEnvironment();
  return !config.ok() || config->world.ranks.rank == 0;
}

int CommandLineError(const std::string& message) {
  if (PrintsCommandLineErrors()) {
    fmt::print(stderr, "kolo-train: {}\n", message);
    std::fflush(stderr);
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kolo-train: data-parallel training of kolo's models (run it under "
      "kolorun)"};
  kolo::train::Flags flags;
  kolo::train::AddFlags(app, &flags);
  app.set_version_flag("--version",
                       [] { return kolo::VersionText("kolo-train"); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 would add a second line ("Run with --help ..."); one is enough.
    return CommandLineError(e.what());
  }
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0) continue;
    for (const std::string& name : option->get_lnames())
      flags.given.insert("--" + name);
  }
  for (const char* name : {"--no-nesterov"}) {
    // CLI11 files the negation under --nesterov; keep which one was given.
    if (std::find_if(argv + 1, argv + argc, [name](const char* arg) {
          return std::string(arg) == name;
        }) != argv + argc)
      flags.given.insert(name);
  }
  // After `given`: some checks depend on which flags were set at all.
  kolo::Status valid = kolo::train::Validate(flags);
  if (!valid.ok()) return CommandLineError(valid.message());
  {
    kolo::StatusOr<kolo::InitOptions> launch =
        kolo::InitOptions::FromEnvironment();
    const int32_t world_size = launch.ok() ? launch->world.ranks.size : 1;
    std::vector<std::string> warnings;
    kolo::Status merged =
        kolo::train::ApplyConfigFile(&flags, world_size, &warnings);
    if (!merged.ok()) return CommandLineError(merged.message());
    if (PrintsCommandLineErrors()) {
      for (const std::string& warning : warnings)
        fmt::print(stderr, "kolo-train: warning: {}\n", warning);
    }
  }

  if (flags.no_kolo) {
    kolo::StatusOr<kolo::InitOptions> config =
        kolo::InitOptions::FromEnvironment();
    if (config.ok() && config->world.ranks.size > 1) {
      return CommandLineError(
          "--no-kolo trains in one process, but a launcher started " +
          std::to_string(config->world.ranks.size) + " ranks");
    }
    try {
      return kolo::train::RunTraining(flags);
    } catch (const std::exception& e) {
      const std::string message = e.what();
      fmt::print(stderr, "kolo-train: {}\n",
                 message.substr(0, message.find('\n')));
      return 1;
    }
  }
  // Elastic workers join each round themselves (kolo/elastic.h).
  if (kolo::train::ModeOf(flags) == kolo::train::TrainingMode::kElastic) {
    return kolo::train::RunElasticTraining(flags);
  }
  kolo::Status init = kolo::Init();
  if (!init.ok()) {
    fmt::print(stderr, "kolo-train: cannot join the job: {}\n",
               init.ToString());
    return 1;
  }
  int exit_code = 1;
  // The edge of the program: LibTorch reports errors (out of memory, a
  // shape it cannot take) by throwing; each becomes one line and exit 1.
  try {
    exit_code = kolo::train::RunTraining(flags);
  } catch (const std::exception& e) {
    const std::string message = e.what();
    fmt::print(stderr, "kolo-train: {}\n",
               message.substr(0, message.find('\n')));
  }
  kolo::Status shutdown = kolo::Shutdown();
  if (!shutdown.ok() && exit_code == 0) {
    fmt::print(stderr, "kolo-train: leaving the job: {}\n",
               shutdown.ToString());
    exit_code = 1;
  }
  return exit_code;
}
