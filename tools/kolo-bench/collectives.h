// kolo-bench collectives: for every requested collective, data type and
// message size, time the out-of-place and the in-place call through kolo's
// public API, report time, algorithm bandwidth and bus bandwidth the way
// nccl-tests does, and check every result against a closed form.
//
// Bandwidths. algbw is size / time. busbw rescales it by what each rank's
// link must carry in a bandwidth-optimal algorithm, so numbers from
// different collectives and world sizes compare against the hardware's
// link speed: a ring allreduce sends and receives 2(n-1)/n of the buffer,
// allgather, reducescatter and alltoall (n-1)/n of the total, broadcast the
// whole buffer once.
//
// Sizes. A row's size is the buffer an allreduce or broadcast works on, the
// total output of an allgather, the total input of a reducescatter and the
// total send buffer of an alltoall. Every size is rounded down to a multiple
// of n * element size so per-rank blocks are whole; sizes that round to zero
// elements are skipped.
//
// Checking. Inputs are small integers chosen from (rank, index) so that
// every result is exact in every data type, including int8 and bfloat16:
// data-movement collectives use values 1..17, sum/avg/min/max values 1..7
// whose per-rank offsets cancel (so averages divide exactly), and prod
// values 1 or 2 with at most two 2s per element. Sums stay exact for up
// to 21 ranks in int8 and 42 in bfloat16. Receive buffers are zeroed before
// the checked call and no expected value is zero, so a call that writes
// nothing cannot pass.
//
// Peers. --peer mpi,gloo,shm,tcp also times every row straight on those
// engines, without kolo's runtime, interleaved with kolo's own rows, and
// compares; peers.h says how.
//
// JSON. --json FILE appends one record to the array in FILE (a report draws
// on many runs): the configuration, "environment", kolo's "rows", and with
// --peer "peers": [{"engine": "mpi", "rows": [same schema as "rows"]}, ...]
// and "memcpy_2thread": [{"size": bytes, "gbps": x}, ...]. Every
// measurement carries "switches_per_call" (see Measurement).
//
// The declarations below are the pure pieces, testable without a world;
// RunCollectivesCommand drives them over an initialized kolo job.
#ifndef KOLO_TOOLS_KOLO_BENCH_COLLECTIVES_H_
#define KOLO_TOOLS_KOLO_BENCH_COLLECTIVES_H_

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "kolo/kolo.h"
#include "table.h"

namespace kolo {
class Backend;
}  // namespace kolo

namespace kolo::bench {

// Where one row's elements live. `elements` is the row's size in elements,
// a multiple of the world size.
struct BufferLayout {
  int64_t call_count = 0;     // the count argument of the kolo call
  int64_t send_elements = 0;  // out of place
  int64_t recv_elements = 0;
  // In place one buffer holds both; send and recv start at these offsets.
  int64_t in_place_elements = 0;
  int64_t in_place_send_offset = 0;
  int64_t in_place_recv_offset = 0;
};

// Where received element k came from: element `index` of rank `rank`'s send
// buffer, or, for rank kEveryRank, the reduction of element `index` over
// every rank.
struct Source {
  static constexpr int32_t kEveryRank = -1;
  int32_t rank = kEveryRank;
  int64_t index = 0;
};

struct CollectiveArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
};

// Everything the benchmark knows about one collective. AllCollectives()
// holds one per collective of the public API; the sweep, the checks and the
// table are written once against this description.
struct CollectiveDescriptor {
  const char* name;
  bool reduces;  // takes a ReduceOp
  bool rooted;   // takes a root
  double (*bus_factor)(int32_t world_size);
  BufferLayout (*layout)(int64_t elements, int32_t rank, int32_t world_size);
  Source (*source)(int64_t recv_index, int64_t call_count, int32_t rank,
                   int32_t root);
  Status (*run)(const CollectiveArgs& args);  // through kolo's runtime
  // The same call straight on an engine (see peers.h for what it adds).
  Status (*run_raw)(Backend& engine, const CollectiveArgs& args, int32_t rank,
                    int32_t world_size);
};

// allreduce, allgather, broadcast, alltoall, reducescatter.
const std::vector<CollectiveDescriptor>& AllCollectives();
StatusOr<const CollectiveDescriptor*> FindCollective(const std::string& name);

// min_bytes, min_bytes * step_factor, ... up to max_bytes inclusive. A
// min_bytes of 0 starts the sweep at 1 byte, since 0 elements are skipped.
std::vector<int64_t> SizeSweep(int64_t min_bytes, int64_t max_bytes,
                               int64_t step_factor);
// `bytes` as whole elements, rounded down to a multiple of world_size.
int64_t RoundedElements(int64_t bytes, DataType type, int32_t world_size);
// The requested iteration count, capped so one size moves at most
// kBytesPerSizeBudget per rank, but never below one unless requested is 0.
inline constexpr int64_t kBytesPerSizeBudget = int64_t{1} << 30;
int32_t CappedIterations(int32_t requested, int64_t bytes);

// The value rank `rank` puts at `index` of its send buffer.
double InputValue(const CollectiveDescriptor& collective, ReduceOp op,
                  int32_t rank, int32_t world_size, int64_t index);
// The value rank `rank` must find at `recv_index` of its receive buffer.
// Integer averages truncate toward zero, as kolo defines them.
double ExpectedValue(const CollectiveDescriptor& collective, ReduceOp op,
                     DataType type, int32_t rank, int32_t world_size,
                     int32_t root, int64_t call_count, int64_t recv_index);

// Element access in any data type; values are converted through double.
double LoadElement(DataType type, const void* data, int64_t index);
void StoreElement(DataType type, void* data, int64_t index, double value);

// Writes InputValue for indices [0, elements) into `data`.
void FillInputs(const CollectiveDescriptor& collective, ReduceOp op,
                DataType type, int32_t rank, int32_t world_size, void* data,
                int64_t elements);
// How many of the `elements` received elements differ from ExpectedValue.
int64_t CountWrong(const CollectiveDescriptor& collective, ReduceOp op,
                   DataType type, int32_t rank, int32_t world_size,
                   int32_t root, int64_t call_count, const void* recv,
                   int64_t elements);

// GB/s (10^9 bytes per second) for `bytes` moved in `seconds`.
double Bandwidth(int64_t bytes, double seconds);

// Flags exactly as typed; ParseCollectivesFlags validates them.
struct CollectivesFlags {
  int64_t min_bytes = 8;
  int64_t max_bytes = 256 << 20;
  int64_t step_factor = 2;
  std::string ops = "allreduce,allgather,broadcast,alltoall,reducescatter";
  std::string dtypes = "float32";
  std::string op = "sum";
  int32_t root = 0;
  int32_t iters = 20;
  int32_t warmup = 5;
  int32_t check = 1;
  std::string json_path;
  std::string peers;  // "mpi,gloo,shm"; empty: none
};

struct CollectivesConfig {
  int64_t min_bytes = 0;
  int64_t max_bytes = 0;
  int64_t step_factor = 2;
  std::vector<const CollectiveDescriptor*> collectives;
  std::vector<DataType> types;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
  int32_t iters = 0;
  int32_t warmup = 0;
  bool check = true;
  std::string json_path;           // empty: no JSON
  std::vector<BackendKind> peers;  // in the order given
};

// Errors name the flag and its bad value. The root is checked against the
// world size later, once the world is known.
StatusOr<CollectivesConfig> ParseCollectivesFlags(
    const CollectivesFlags& flags);

struct Measurement {
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::optional<int64_t> wrong;  // summed over ranks; empty when unchecked
  // Context switches of every rank's process (all its threads, voluntary
  // and involuntary) during the timed calls, summed over ranks, per call.
  double switches_per_call = 0;
};

// This process's context switches so far, over all its threads.
int64_t ProcessContextSwitches();

struct ResultRow {
  std::string collective;
  int64_t bytes = 0;
  int64_t elements = 0;
  DataType type = DataType::kFloat32;
  std::optional<ReduceOp> op;  // empty for data movement
  int32_t root = -1;           // -1 for unrooted collectives
  Measurement out_of_place;
  Measurement in_place;
};

// One peer engine's rows, in the order of kolo's.
struct PeerResults {
  BackendKind engine = BackendKind::kMpi;
  std::vector<ResultRow> rows;
};

// The 2-thread memcpy rate at one size (see peers.h).
struct MemcpyPoint {
  int64_t bytes = 0;
  double gbps = 0;
};

Measurement MakeMeasurement(int64_t bytes, double seconds, double bus_factor,
                            std::optional<int64_t> wrong);

// The result table's columns, and one row's cells under them.
Table CollectivesTable();
std::vector<std::string> RowCells(const ResultRow& row);

// Wrong values over every row, and the mean busbw over every in-place and
// out-of-place measurement (0 without rows).
int64_t TotalWrong(const std::vector<ResultRow>& rows);
double AverageBusBandwidth(const std::vector<ResultRow>& rows);

// The configuration and every row, for --json; "peers" and
// "memcpy_2thread" only when config.peers names any. The caller adds
// "environment".
nlohmann::json ResultsToJson(const CollectivesConfig& config,
                             BackendKind backend, int32_t world_size,
                             const std::vector<ResultRow>& rows,
                             const std::vector<PeerResults>& peers = {},
                             const std::vector<MemcpyPoint>& memcpy = {});

// Registers `collectives` and its flags under `parent`; the flags land in
// `flags`, which must outlive parsing.
CLI::App* AddCollectivesCommand(CLI::App& parent, CollectivesFlags* flags);
// Initializes kolo (and the peers), runs the sweep, prints on rank 0 and
// shuts down. Returns the process exit status: 0 when every result, kolo's
// and the peers', was right, 1 on an error (printed as "kolo-bench:
// <status>"), 2 on wrong results.
int RunCollectivesCommand(const CollectivesFlags& flags);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_COLLECTIVES_H_
