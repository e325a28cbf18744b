// kolo-bench link: what plain TCP does between two hosts of a job, the
// ceiling that kolo's cross-host collectives are measured against.
//
//   kolorun -H h1:2,h2:2 kolo-bench link [--pings 1000] [--seconds 1.5]
//       [--json FILE]
//
// Who measures. Rank 0 and the lowest rank on another host that is the
// first rank of its host (cross rank 1, local rank 0 under kolorun) open one
// TCP connection between their KOLO_GLOO_HOSTNAME addresses, the addresses
// kolo's engines listen on, so the figures describe the path the engines
// use. The partner listens on port 0 (the OS picks the port) and publishes
// "address:port" in the job's store; rank 0 binds its own address and
// connects. Every other rank waits at the final allreduce, which carries
// the verdict to every rank.
//
// Round trip. Rank 0 sends --ping-bytes (4 KiB), the partner echoes them,
// --warmup times untimed and then --pings times each timed alone, with
// TCP_NODELAY on both ends so no ping waits for Nagle. The table gives the
// median, the minimum and the 90th percentile (nearest rank); bandwidth is
// 2 * bytes / median. Each echo is compared with what was sent (every ping
// its own byte pattern).
//
// Stream. Rank 0 writes --write-bytes at a time for --seconds, then shuts
// its side down; the partner reads to the end and answers with the count it
// received. The time runs from the first write to that answer, so bytes
// still in flight or in socket buffers when the writing stops are counted
// at the time they arrive, not when they were handed to the kernel. GB/s is
// 10^9 bytes per second; Gbit/s is 8 times that, the unit a link's rate is
// quoted in.
//
// Checked: the bytes received equal the bytes sent, in both measurements.
// Exit status as the other subcommands: 0 right, 1 error, 2 wrong.
//
// JSON. --json FILE appends {"benchmark": "link", "kind": "link", "np",
// "config", "endpoints": [rank 0's, the partner's] ({"rank", "host",
// "address"}), "round_trip": {"bytes", "iters", "median_us", "min_us",
// "p90_us", "mean_us", "gbps", "wrong"}, "stream": {"bytes_sent",
// "bytes_received", "writes", "seconds", "gbps", "gbit_per_s", "wrong"},
// "wrong", "environment"} to the array in FILE (rank 0).
#ifndef KOLO_TOOLS_KOLO_BENCH_LINK_H_
#define KOLO_TOOLS_KOLO_BENCH_LINK_H_

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/status.h"
#include "table.h"

namespace kolo::bench {

// The command's flags, with their defaults; CLI11 fills them (the byte
// sizes through AddByteSizeFlag) and ValidateLinkConfig checks them.
struct LinkConfig {
  int32_t pings = 1000;
  int32_t warmup = 100;
  int64_t ping_bytes = 4096;
  double seconds = 1.5;
  int64_t write_bytes = 1 << 20;
  std::string json_path;  // empty: no JSON
};

// kInvalidArgument naming the flag and its bad value.
Status ValidateLinkConfig(const LinkConfig& config);

// Median, minimum, 90th percentile (nearest rank) and mean of round trips.
struct RoundTripStats {
  double median_us = 0;
  double min_us = 0;
  double p90_us = 0;
  double mean_us = 0;
};
// Of `seconds`, each one round trip; all zero when empty. The median of an
// even count is the mean of the middle two.
RoundTripStats SummarizeRoundTrips(std::vector<double> seconds);

// One end of the measured connection.
struct LinkEndpoint {
  int32_t rank = 0;
  std::string host;     // KOLO_HOST_ID, or the hostname
  std::string address;  // the numeric address the socket used
};

struct LinkResult {
  LinkEndpoint local;  // rank 0
  LinkEndpoint peer;
  int64_t ping_bytes = 0;
  int32_t pings = 0;
  RoundTripStats round_trip;
  int64_t ping_wrong = 0;  // echoes that differ from what was sent
  int64_t stream_bytes_sent = 0;
  int64_t stream_bytes_received = 0;  // as the partner counted them
  int64_t stream_writes = 0;
  double stream_seconds = 0;
};

// GB/s of the round trip (2 * bytes / median) and of the stream.
double RoundTripGbps(const LinkResult& result);
double StreamGbps(const LinkResult& result);
// Bytes the partner did not get (or got in excess) in the stream.
int64_t StreamWrong(const LinkResult& result);
int64_t LinkWrong(const LinkResult& result);

// The result table's columns and its two rows (round trip, stream).
Table LinkTable();
std::vector<std::vector<std::string>> LinkRows(const LinkResult& result);

// The record --json appends, without "environment" (the caller adds it).
nlohmann::json LinkToJson(const LinkConfig& config, int32_t world_size,
                          const LinkResult& result);

// Registers `link` and its flags under `parent`; the flags land in `flags`,
// which must outlive parsing.
CLI::App* AddLinkCommand(CLI::App& parent, LinkConfig* config);
// Initializes kolo, measures, prints on rank 0 and shuts down. Returns the
// process exit status: 0 when every byte arrived as sent, 1 on an error
// (printed as "kolo-bench: <status>"), 2 on wrong results.
int RunLinkCommand(const LinkConfig& config);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_LINK_H_
