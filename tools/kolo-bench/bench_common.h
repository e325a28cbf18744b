// What kolo-bench's commands share: the names their tables give the
// frameworks, how they print memory, and how a command reports the error
// that ends it.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "kolo/status.h"
#include "table.h"

namespace kolo::bench {

inline constexpr const char* kKolo = "kolo";
inline constexpr const char* kLibtorch = "libtorch";
inline constexpr const char* kTorchDdp = "torch-ddp";

inline constexpr double kMiB = 1 << 20;

// Bytes as MiB with one decimal, as the memory tables give them.
inline std::string Mib(double bytes) { return FormatFixed(bytes / kMiB, 1); }

// Prints the error on stderr and returns the command's exit code.
inline int Fail(const Status& status) {
  fmt::print(stderr, "kolo-bench: {}\n", status.ToString());
  return 1;
}

}  // namespace kolo::bench
