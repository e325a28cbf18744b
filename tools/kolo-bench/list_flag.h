// Flags that take comma-separated lists (--np 1,2,4, --peer mpi,gloo,
// --ops allreduce,broadcast): one way to split them for every subcommand.
#ifndef KOLO_TOOLS_KOLO_BENCH_LIST_FLAG_H_
#define KOLO_TOOLS_KOLO_BENCH_LIST_FLAG_H_

#include <algorithm>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::bench {

// The items of `text` split at commas, trimmed of spaces and tabs; empty
// items are dropped ("1, 2,,4" gives 1, 2, 4).
std::vector<std::string> SplitList(const std::string& text);

// The entries of `known` (each with a `name`) that the list `text` names,
// in the order given, duplicates dropped: how --variants picks kolo-bench
// zero's and checkpoint's variants. kInvalidArgument naming `flag`, the
// first unknown item and `expected` (the names, in words) otherwise.
template <typename T>
StatusOr<std::vector<T>> SelectByName(const std::string& text,
                                      const std::vector<T>& known,
                                      const std::string& flag,
                                      const std::string& expected) {
  std::vector<T> out;
  for (const std::string& item : SplitList(text)) {
    auto named = [&](const T& v) { return v.name == item; };
    const auto it = std::find_if(known.begin(), known.end(), named);
    if (it == known.end()) {
      return InvalidArgument(flag + ": unknown variant '" + item +
                             "' (expected " + expected + ")");
    }
    if (std::none_of(out.begin(), out.end(), named)) out.push_back(*it);
  }
  return out;
}

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_LIST_FLAG_H_
