// What kolo-bench's commands share: the names their tables give the
// frameworks, how they print memory, and how a command reports the error
// that ends it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "kolo/status.h"
#include "table.h"

namespace kolo::bench {

inline constexpr const char* kKolo = "kolo";
inline constexpr const char* kLibtorch = "libtorch";
inline constexpr const char* kTorchDdp = "torch-ddp";

inline constexpr double kMiB = 1 << 20;

// A column of a command's Table: its title, the unit line under it, its
// width, the label over a group of columns, and which side it aligns to.
inline Table::Column TableColumn(const char* title, const char* unit, int width,
                                 const char* group = "", bool left = false) {
  Table::Column c;
  c.title = title;
  c.unit = unit;
  c.width = width;
  c.group = group;
  c.left_align = left;
  return c;
}

// Bytes as MiB with one decimal, as the memory tables give them.
inline std::string Mib(double bytes) { return FormatFixed(bytes / kMiB, 1); }

// kInvalidArgument "FLAG VALUE must be at least MIN" ("must not be
// negative" for a minimum of 0) when `value` is below `min`.
inline Status CheckAtLeast(const char* flag, int64_t value, int64_t min) {
  if (value >= min) return Status::Ok();
  return InvalidArgument(
      min == 0 ? fmt::format("{} {} must not be negative", flag, value)
               : fmt::format("{} {} must be at least {}", flag, value, min));
}

// Prints the error on stderr and returns the command's exit code.
inline int Fail(const Status& status) {
  fmt::print(stderr, "kolo-bench: {}\n", status.ToString());
  return 1;
}

}  // namespace kolo::bench
