// Flags that take comma-separated lists (--np 1,2,4, --peer mpi,gloo,
// --ops allreduce,broadcast): one way to split them for every subcommand.
#ifndef KOLO_TOOLS_KOLO_BENCH_LIST_FLAG_H_
#define KOLO_TOOLS_KOLO_BENCH_LIST_FLAG_H_

#include <string>
#include <vector>

namespace kolo::bench {

// The items of `text` split at commas, trimmed of spaces and tabs; empty
// items are dropped ("1, 2,,4" gives 1, 2, 4).
std::vector<std::string> SplitList(const std::string& text);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_LIST_FLAG_H_
