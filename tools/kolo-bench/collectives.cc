#include "collectives.h"

#include <fmt/format.h>

#include <sys/resource.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "bench_common.h"
#include "environment.h"
#include "json_file.h"
#include "kolo_internal/backend.h"
#include "kolo_internal/config.h"
#include "kolo_internal/reduce.h"
#include "list_flag.h"
#include "peers.h"
#include "raw_backend.h"

namespace kolo::bench {
namespace {

// ---- The collectives --------------------------------------------------------
// Each layout/source pair is one reading of the contract in kolo.h; `c` is the
// per-rank block of the row's `elements` where the collective splits it.

double RingAllreduceFactor(int32_t n) { return 2.0 * (n - 1) / n; }
double ShareFactor(int32_t n) { return static_cast<double>(n - 1) / n; }
double WholeBufferFactor(int32_t) { return 1.0; }

// allreduce and broadcast: send and recv are the whole buffer.
BufferLayout WholeBufferLayout(int64_t elements, int32_t, int32_t) {
  BufferLayout layout;
  layout.call_count = elements;
  layout.send_elements = elements;
  layout.recv_elements = elements;
  layout.in_place_elements = elements;
  return layout;
}

// allgather: each rank sends c; recv holds every rank's c in rank order and,
// in place, this rank's block already sits at rank * c.
BufferLayout AllgatherLayout(int64_t elements, int32_t rank, int32_t n) {
  const int64_t c = elements / n;
  BufferLayout layout;
  layout.call_count = c;
  layout.send_elements = c;
  layout.recv_elements = elements;
  layout.in_place_elements = elements;
  layout.in_place_send_offset = rank * c;
  return layout;
}

// alltoall: n blocks of c out and n blocks of c back, same pointer in place.
BufferLayout AlltoallLayout(int64_t elements, int32_t, int32_t n) {
  BufferLayout layout = WholeBufferLayout(elements, 0, n);
  layout.call_count = elements / n;
  return layout;
}

// reducescatter, allgather's mirror: send holds n blocks of c; rank r
// keeps the reduction of block r, which in place lands on block r of the
// send buffer.
BufferLayout ReducescatterLayout(int64_t elements, int32_t rank, int32_t n) {
  BufferLayout layout = AllgatherLayout(elements, rank, n);
  std::swap(layout.send_elements, layout.recv_elements);
  std::swap(layout.in_place_send_offset, layout.in_place_recv_offset);
  return layout;
}

Source AllreduceSource(int64_t k, int64_t, int32_t, int32_t) {
  return {Source::kEveryRank, k};
}
Source AllgatherSource(int64_t k, int64_t c, int32_t, int32_t) {
  return {static_cast<int32_t>(k / c), k % c};
}
Source BroadcastSource(int64_t k, int64_t, int32_t, int32_t root) {
  return {root, k};
}
// Block j of rank r's recv is block r of rank j's send.
Source AlltoallSource(int64_t k, int64_t c, int32_t rank, int32_t) {
  return {static_cast<int32_t>(k / c), rank * c + k % c};
}
Source ReducescatterSource(int64_t k, int64_t c, int32_t rank, int32_t) {
  return {Source::kEveryRank, rank * c + k};
}

Status RunAllreduce(const CollectiveArgs& a) {
  return Allreduce(a.send, a.recv, a.count, a.type, a.op);
}
Status RunAllgather(const CollectiveArgs& a) {
  return Allgather(a.send, a.recv, a.count, a.type);
}
Status RunBroadcast(const CollectiveArgs& a) {
  return Broadcast(a.send, a.recv, a.count, a.type, a.root);
}
Status RunAlltoall(const CollectiveArgs& a) {
  return Alltoall(a.send, a.recv, a.count, a.type);
}
Status RunReducescatter(const CollectiveArgs& a) {
  return Reducescatter(a.send, a.recv, a.count, a.type, a.op);
}

// The same calls on an engine. A Backend never averages: an average is the
// sum divided once, as the runtime's executor does it.
ReduceOp EngineOp(ReduceOp op) {
  return op == ReduceOp::kAverage ? ReduceOp::kSum : op;
}

void FinishAverage(const CollectiveArgs& a, int64_t count, int32_t n) {
  if (a.op == ReduceOp::kAverage) DivideInPlace(a.type, a.recv, count, n);
}

Status RawAllreduce(Backend& engine, const CollectiveArgs& a, int32_t,
                    int32_t n) {
  KOLO_RETURN_IF_ERROR(
      engine.Allreduce(a.send, a.recv, a.count, a.type, EngineOp(a.op)));
  FinishAverage(a, a.count, n);
  return Status::Ok();
}

Status RawAllgather(Backend& engine, const CollectiveArgs& a, int32_t,
                    int32_t n) {
  return engine.Allgatherv(a.send, a.recv, std::vector<int64_t>(n, a.count),
                           a.type);
}

// Engines broadcast in place; the root's input joins its output first.
Status RawBroadcast(Backend& engine, const CollectiveArgs& a, int32_t rank,
                    int32_t) {
  if (rank == a.root && a.send != a.recv) {
    std::memcpy(a.recv, a.send, a.count * DataTypeSize(a.type));
  }
  return engine.Broadcast(a.recv, a.count, a.type, a.root);
}

Status RawAlltoall(Backend& engine, const CollectiveArgs& a, int32_t,
                   int32_t n) {
  const std::vector<int64_t> counts(n, a.count);
  return engine.Alltoallv(a.send, counts, a.recv, counts, a.type);
}

Status RawReducescatter(Backend& engine, const CollectiveArgs& a, int32_t,
                        int32_t n) {
  KOLO_RETURN_IF_ERROR(
      engine.Reducescatter(a.send, a.recv, a.count, a.type, EngineOp(a.op)));
  FinishAverage(a, a.count, n);
  return Status::Ok();
}

// ---- Input values -----------------------------------------------------------

// Data movement: 1..17, and 5 is coprime to 17, so at one index the first 17
// ranks all differ and a block delivered from the wrong rank shows.
double MovementValue(int32_t rank, int64_t index) {
  return static_cast<double>((int64_t{5} * rank + index) % 17 + 1);
}

// Products: 2 where rank < 4 and (rank + index) % 3 == 0, else 1. At most
// two of ranks 0..3 match at one index, so every product is 1, 2 or 4.
double ProductValue(int32_t rank, int64_t index) {
  return (rank < 4 && (rank + index) % 3 == 0) ? 2.0 : 1.0;
}

// Sum, avg, min and max: a base of 2..6 chosen by the index plus +1 on even
// and -1 on odd ranks, pairing them up so the offsets cancel (a lone last
// rank gets 0). The sum is then n * base, so the average is exact, and min
// and max differ from it whenever n > 1.
double ArithmeticValue(int32_t rank, int32_t n, int64_t index) {
  int64_t offset = 0;
  if (rank % 2 == 1) {
    offset = -1;
  } else if (rank + 1 < n) {
    offset = 1;
  }
  return static_cast<double>(index % 5 + 2 + offset);
}

double Reduce(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
  }
  return a;
}

// ---- Flags ------------------------------------------------------------------

std::string CollectiveNames() {
  std::string names;
  for (const CollectiveDescriptor& collective : AllCollectives()) {
    if (!names.empty()) names += ", ";
    names += collective.name;
  }
  return names;
}

// ---- Running ----------------------------------------------------------------

using Clock = std::chrono::steady_clock;

// What a row's timed calls run on: kolo's runtime, or one peer engine. The
// bench's own bookkeeping (the slowest rank's times, wrong values over
// ranks) always goes through kolo, which is up for the whole sweep.
class RowEngine {
 public:
  virtual ~RowEngine() = default;
  virtual std::string Name() const = 0;
  virtual Status Run(const CollectiveDescriptor& collective,
                     const CollectiveArgs& args) = 0;
  // Lines the ranks up before the timed iterations.
  virtual Status Barrier() = 0;
};

class RuntimeEngine : public RowEngine {
 public:
  std::string Name() const override { return "kolo"; }
  Status Run(const CollectiveDescriptor& collective,
             const CollectiveArgs& args) override {
    return collective.run(args);
  }
  Status Barrier() override { return ::kolo::Barrier(); }
};

class PeerEngine : public RowEngine {
 public:
  PeerEngine(BackendKind kind, std::unique_ptr<Backend> backend)
      : kind_(kind), backend_(std::move(backend)) {}
  std::string Name() const override {
    return fmt::format("peer {}", BackendName(kind_));
  }
  Status Run(const CollectiveDescriptor& collective,
             const CollectiveArgs& args) override {
    return collective.run_raw(*backend_, args, Rank(), Size());
  }
  Status Barrier() override { return backend_->Barrier(); }
  BackendKind kind() const { return kind_; }

 private:
  const BackendKind kind_;
  std::unique_ptr<Backend> backend_;
};

std::string RowName(const CollectiveDescriptor& collective, DataType type,
                    int64_t bytes) {
  return fmt::format("{} of {} B {}", collective.name, bytes,
                     DataTypeName(type));
}

Status RunOnce(RowEngine& engine, const CollectiveDescriptor& collective,
               const CollectiveArgs& args, int64_t bytes) {
  Status status = engine.Run(collective, args);
  if (!status.ok()) {
    return status.WithContext(fmt::format(
        "{}: {}", engine.Name(), RowName(collective, args.type, bytes)));
  }
  return Status::Ok();
}

StatusOr<int64_t> SumOverRanks(int64_t local) {
  KOLO_RETURN_IF_ERROR(
      Allreduce(&local, &local, 1, DataType::kInt64, ReduceOp::kSum));
  return local;
}

struct Timing {
  double seconds = 0;  // the mean over iterations of the slowest rank
  double switches_per_call = 0;
};

// Warms up, then times each iteration on its own; the slowest rank defines
// an iteration's time, since the collective is not done until every rank
// is.
StatusOr<Timing> TimeCollective(RowEngine& engine,
                                const CollectiveDescriptor& collective,
                                const CollectiveArgs& args, int64_t bytes,
                                int32_t warmup, int32_t iters) {
  for (int32_t i = 0; i < warmup; ++i) {
    KOLO_RETURN_IF_ERROR(RunOnce(engine, collective, args, bytes));
  }
  KOLO_RETURN_IF_ERROR(engine.Barrier());
  std::vector<double> seconds(iters);
  const int64_t switches_before = ProcessContextSwitches();
  for (int32_t i = 0; i < iters; ++i) {
    const Clock::time_point start = Clock::now();
    KOLO_RETURN_IF_ERROR(RunOnce(engine, collective, args, bytes));
    seconds[i] = std::chrono::duration<double>(Clock::now() - start).count();
  }
  KOLO_ASSIGN_OR_RETURN(
      int64_t switches,
      SumOverRanks(ProcessContextSwitches() - switches_before));
  KOLO_RETURN_IF_ERROR(Allreduce(seconds.data(), seconds.data(), iters,
                                 DataType::kFloat64, ReduceOp::kMax));
  Timing timing;
  for (double s : seconds) timing.seconds += s;
  timing.seconds /= iters;
  timing.switches_per_call = static_cast<double>(switches) / iters;
  return timing;
}

// One table row on `engine`: out of place, then in place, each timed and
// then (with --check) run once more on fresh inputs and zeroed outputs and
// compared.
StatusOr<ResultRow> RunRow(const CollectivesConfig& config,
                           const CollectiveDescriptor& collective,
                           DataType type, int64_t elements, RowEngine& engine) {
  const int32_t rank = Rank();
  const int32_t n = Size();
  const int64_t element_size = DataTypeSize(type);
  const int64_t bytes = elements * element_size;
  const int32_t iters = CappedIterations(config.iters, bytes);
  const int32_t warmup = CappedIterations(config.warmup, bytes);
  const BufferLayout layout = collective.layout(elements, rank, n);
  const double bus_factor = collective.bus_factor(n);

  ResultRow row;
  row.collective = collective.name;
  row.bytes = bytes;
  row.elements = elements;
  row.type = type;
  if (collective.reduces) row.op = config.op;
  if (collective.rooted) row.root = config.root;

  CollectiveArgs args;
  args.count = layout.call_count;
  args.type = type;
  args.op = config.op;
  args.root = config.root;

  auto count_wrong = [&](const void* recv) {
    return CountWrong(collective, config.op, type, rank, n, config.root,
                      layout.call_count, recv, layout.recv_elements);
  };

  {
    std::vector<unsigned char> send(layout.send_elements * element_size);
    std::vector<unsigned char> recv(layout.recv_elements * element_size);
    FillInputs(collective, config.op, type, rank, n, send.data(),
               layout.send_elements);
    args.send = send.data();
    args.recv = recv.data();
    KOLO_ASSIGN_OR_RETURN(
        Timing timing,
        TimeCollective(engine, collective, args, bytes, warmup, iters));
    std::optional<int64_t> wrong;
    if (config.check) {
      std::fill(recv.begin(), recv.end(), 0);
      KOLO_RETURN_IF_ERROR(RunOnce(engine, collective, args, bytes));
      KOLO_ASSIGN_OR_RETURN(wrong, SumOverRanks(count_wrong(recv.data())));
    }
    row.out_of_place =
        MakeMeasurement(bytes, timing.seconds, bus_factor, wrong);
    row.out_of_place.switches_per_call = timing.switches_per_call;
  }

  {
    std::vector<unsigned char> buffer(layout.in_place_elements * element_size);
    unsigned char* send =
        buffer.data() + layout.in_place_send_offset * element_size;
    unsigned char* recv =
        buffer.data() + layout.in_place_recv_offset * element_size;
    auto reset = [&] {
      std::fill(buffer.begin(), buffer.end(), 0);
      FillInputs(collective, config.op, type, rank, n, send,
                 layout.send_elements);
    };
    reset();
    args.send = send;
    args.recv = recv;
    KOLO_ASSIGN_OR_RETURN(
        Timing timing,
        TimeCollective(engine, collective, args, bytes, warmup, iters));
    std::optional<int64_t> wrong;
    if (config.check) {
      reset();
      KOLO_RETURN_IF_ERROR(RunOnce(engine, collective, args, bytes));
      KOLO_ASSIGN_OR_RETURN(wrong, SumOverRanks(count_wrong(recv)));
    }
    row.in_place = MakeMeasurement(bytes, timing.seconds, bus_factor, wrong);
    row.in_place.switches_per_call = timing.switches_per_call;
  }
  return row;
}

// The memcpy line of one size: rank 0 copies while the others wait, so the
// copy has the cores to itself (see peers.h).
StatusOr<MemcpyPoint> MeasureMemcpy(int64_t bytes) {
  MemcpyPoint point;
  point.bytes = bytes;
  KOLO_RETURN_IF_ERROR(Barrier());
  if (Rank() == 0) point.gbps = Memcpy2ThreadGbps(bytes);
  KOLO_RETURN_IF_ERROR(Barrier());
  return point;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& name : names) {
    if (!joined.empty()) joined += ",";
    joined += name;
  }
  return joined;
}

std::vector<std::string> CollectiveNameList(const CollectivesConfig& config) {
  std::vector<std::string> names;
  for (const CollectiveDescriptor* c : config.collectives) {
    names.push_back(c->name);
  }
  return names;
}

std::vector<std::string> TypeNameList(const CollectivesConfig& config) {
  std::vector<std::string> names;
  for (DataType type : config.types) names.push_back(DataTypeName(type));
  return names;
}

std::vector<std::string> PeerNameList(const CollectivesConfig& config) {
  std::vector<std::string> names;
  for (BackendKind peer : config.peers) names.push_back(BackendName(peer));
  return names;
}

void PrintTableHeader(const Table& table) {
  for (const std::string& line : table.HeaderLines()) {
    fmt::print("{}\n", line);
  }
}

void PrintHeader(const CollectivesConfig& config, const Table& table) {
  fmt::print(
      "# kolo-bench collectives: backend {}, np {}, minbytes {}, maxbytes {}, "
      "stepfactor {}, iters {}, warmup {}, check {}\n",
      BackendName(ActiveBackend()), Size(), config.min_bytes, config.max_bytes,
      config.step_factor, config.iters, config.warmup, config.check ? 1 : 0);
  fmt::print("# ops {}; dtypes {}; redop {}; root {}\n",
             JoinNames(CollectiveNameList(config)),
             JoinNames(TypeNameList(config)), ReduceOpName(config.op),
             config.root);
  fmt::print(
      "# iters and warmup are capped so each size moves at most {} GiB per "
      "rank; time is the mean over iters of the slowest rank\n",
      kBytesPerSizeBudget >> 30);
  if (!config.peers.empty()) {
    fmt::print(
        "# peers {}: each row also runs straight on those engines (no "
        "runtime), right after kolo's; their tables follow kolo's\n",
        JoinNames(PeerNameList(config)));
  }
  fmt::print("#\n");
  PrintTableHeader(table);
  std::fflush(stdout);
}

void PrintFooter(const std::vector<ResultRow>& rows) {
  const int64_t wrong = TotalWrong(rows);
  fmt::print("# Out of bounds values : {} {}\n", wrong,
             wrong == 0 ? "OK" : "FAILED");
  fmt::print("# Avg bus bandwidth    : {}\n#\n",
             FormatFixed(AverageBusBandwidth(rows), 3));
}

void PrintWrongRows(const std::string& engine,
                    const std::vector<ResultRow>& rows) {
  for (const ResultRow& row : rows) {
    const int64_t out = row.out_of_place.wrong.value_or(0);
    const int64_t in = row.in_place.wrong.value_or(0);
    if (out + in == 0) continue;
    fmt::print(stderr,
               "kolo-bench: {}: wrong results in {} {} size {} B: {} out of "
               "place, {} in place\n",
               engine, row.collective, DataTypeName(row.type), row.bytes, out,
               in);
  }
}

// The peer tables and the comparison, after kolo's table.
void PrintPeers(const CollectivesConfig& config,
                const std::vector<ResultRow>& rows,
                const std::vector<PeerResults>& peers,
                const std::vector<MemcpyPoint>& memcpy) {
  const Table table = CollectivesTable();
  for (const PeerResults& peer : peers) {
    fmt::print("# peer {}: the same calls on kolo's {} backend, no runtime\n",
               BackendName(peer.engine), BackendName(peer.engine));
    PrintTableHeader(table);
    for (const ResultRow& row : peer.rows) {
      fmt::print("{}\n", table.Row(RowCells(row)));
    }
    PrintFooter(peer.rows);
  }
  fmt::print(
      "# kolo against its peers, in place. kolo/X = kolo busbw / X busbw = X "
      "time / kolo time (above 1: kolo is faster)\n"
      "# memcpy2t: two threads on rank 0 each copying half of a buffer of "
      "the size, GB/s = bytes / time; kolo/ under it = kolo busbw / that\n");
  const Table comparison = ComparisonTable(config.peers);
  PrintTableHeader(comparison);
  const std::vector<ComparisonRow> compared = Compare(rows, peers, memcpy);
  for (const ComparisonRow& row : compared) {
    fmt::print("{}\n", comparison.Row(ComparisonCells(row, config.peers)));
  }
  fmt::print(
      "#\n"
      "# context switches per call, in place: every thread of every rank's "
      "process, summed over ranks\n");
  const Table switches = SwitchesTable(config.peers);
  PrintTableHeader(switches);
  for (const ComparisonRow& row : compared) {
    fmt::print("{}\n", switches.Row(SwitchesCells(row, config.peers)));
  }
  fmt::print("#\n");
}

// The peers named by --peer, in order; kolo must be initialized. `mpi` is
// the MPI backend built before kolo::Init() when --peer names mpi.
StatusOr<std::vector<std::unique_ptr<PeerEngine>>> MakePeers(
    const CollectivesConfig& config, std::unique_ptr<Backend> mpi) {
  std::vector<std::unique_ptr<PeerEngine>> peers;
  for (BackendKind kind : config.peers) {
    std::unique_ptr<Backend> backend;
    if (kind == BackendKind::kMpi) {
      if (!mpi) return Internal("--peer mpi: no MPI backend was built");
      backend = std::move(mpi);
    } else {
      StatusOr<std::unique_ptr<Backend>> created = CreateRawStoreBackend(
          kind, fmt::format("bench/peer-{}", BackendName(kind)));
      if (!created.ok()) {
        return created.status().WithContext(
            fmt::format("--peer {}", BackendName(kind)));
      }
      backend = std::move(created).value();
    }
    peers.push_back(std::make_unique<PeerEngine>(kind, std::move(backend)));
  }
  return peers;
}

// Runs the whole sweep on every rank; rank 0 prints. Returns whether every
// checked value, kolo's and the peers', was right.
StatusOr<bool> RunCollectives(const CollectivesConfig& config,
                              std::unique_ptr<Backend> mpi_peer) {
  const int32_t n = Size();
  const bool printer = Rank() == 0;
  if (config.root >= n) {
    return InvalidArgument(fmt::format(
        "--root {} is not a rank of this {}-rank world", config.root, n));
  }
  if (!config.peers.empty() && n < 2) {
    return InvalidArgument(fmt::format(
        "--peer {} compares engines, which takes at least 2 ranks; this world "
        "has {}: start it with kolorun -np 2 or more",
        JoinNames(PeerNameList(config)), n));
  }
  KOLO_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<PeerEngine>> engines,
                        MakePeers(config, std::move(mpi_peer)));

  const Table table = CollectivesTable();
  if (printer) PrintHeader(config, table);

  RuntimeEngine kolo_engine;
  std::vector<ResultRow> rows;
  std::vector<PeerResults> peers;
  for (const std::unique_ptr<PeerEngine>& engine : engines) {
    peers.push_back({engine->kind(), {}});
  }
  std::vector<MemcpyPoint> memcpy;
  for (const CollectiveDescriptor* collective : config.collectives) {
    for (DataType type : config.types) {
      int64_t previous = -1;
      for (int64_t bytes :
           SizeSweep(config.min_bytes, config.max_bytes, config.step_factor)) {
        const int64_t elements = RoundedElements(bytes, type, n);
        if (elements == 0 || elements == previous) continue;
        previous = elements;
        KOLO_ASSIGN_OR_RETURN(ResultRow row, RunRow(config, *collective, type,
                                                    elements, kolo_engine));
        if (printer) {
          fmt::print("{}\n", table.Row(RowCells(row)));
          std::fflush(stdout);
        }
        for (size_t p = 0; p < engines.size(); ++p) {
          KOLO_ASSIGN_OR_RETURN(
              ResultRow peer_row,
              RunRow(config, *collective, type, elements, *engines[p]));
          peers[p].rows.push_back(std::move(peer_row));
        }
        const bool measured = std::any_of(
            memcpy.begin(), memcpy.end(),
            [&](const MemcpyPoint& p) { return p.bytes == row.bytes; });
        if (!engines.empty() && !measured) {
          KOLO_ASSIGN_OR_RETURN(MemcpyPoint point, MeasureMemcpy(row.bytes));
          memcpy.push_back(point);
        }
        rows.push_back(std::move(row));
      }
    }
  }
  // The peers' engines go before kolo shuts down, while their peers are
  // certainly still there to say goodbye to.
  engines.clear();

  int64_t wrong = TotalWrong(rows);
  for (const PeerResults& peer : peers) wrong += TotalWrong(peer.rows);
  if (printer) {
    PrintFooter(rows);
    if (!peers.empty()) PrintPeers(config, rows, peers, memcpy);
    std::fflush(stdout);
    PrintWrongRows("kolo", rows);
    for (const PeerResults& peer : peers) {
      PrintWrongRows(fmt::format("peer {}", BackendName(peer.engine)),
                     peer.rows);
    }
    if (!config.json_path.empty()) {
      nlohmann::json record =
          ResultsToJson(config, ActiveBackend(), n, rows, peers, memcpy);
      record["environment"] = Environment();
      KOLO_RETURN_IF_ERROR(
          AppendJsonRecord(config.json_path, std::move(record)));
    }
  }
  return wrong == 0;
}

}  // namespace

const std::vector<CollectiveDescriptor>& AllCollectives() {
  static const std::vector<CollectiveDescriptor> kCollectives = {
      {"allreduce", true, false, RingAllreduceFactor, WholeBufferLayout,
       AllreduceSource, RunAllreduce, RawAllreduce},
      {"allgather", false, false, ShareFactor, AllgatherLayout, AllgatherSource,
       RunAllgather, RawAllgather},
      {"broadcast", false, true, WholeBufferFactor, WholeBufferLayout,
       BroadcastSource, RunBroadcast, RawBroadcast},
      {"alltoall", false, false, ShareFactor, AlltoallLayout, AlltoallSource,
       RunAlltoall, RawAlltoall},
      {"reducescatter", true, false, ShareFactor, ReducescatterLayout,
       ReducescatterSource, RunReducescatter, RawReducescatter},
  };
  return kCollectives;
}

StatusOr<const CollectiveDescriptor*> FindCollective(const std::string& name) {
  for (const CollectiveDescriptor& collective : AllCollectives()) {
    if (name == collective.name) return &collective;
  }
  return InvalidArgument(fmt::format("unknown collective '{}' (expected {})",
                                     name, CollectiveNames()));
}

std::vector<int64_t> SizeSweep(int64_t min_bytes, int64_t max_bytes,
                               int64_t step_factor) {
  std::vector<int64_t> sizes;
  if (step_factor < 2) step_factor = 2;
  for (int64_t bytes = std::max<int64_t>(min_bytes, 1); bytes <= max_bytes;) {
    sizes.push_back(bytes);
    if (bytes > std::numeric_limits<int64_t>::max() / step_factor) break;
    bytes *= step_factor;
  }
  return sizes;
}

int64_t RoundedElements(int64_t bytes, DataType type, int32_t world_size) {
  const int64_t elements = bytes / DataTypeSize(type);
  return elements - elements % world_size;
}

int32_t CappedIterations(int32_t requested, int64_t bytes) {
  if (bytes <= 0) return requested;
  const int64_t budget = std::max<int64_t>(1, kBytesPerSizeBudget / bytes);
  return static_cast<int32_t>(std::min<int64_t>(requested, budget));
}

double InputValue(const CollectiveDescriptor& collective, ReduceOp op,
                  int32_t rank, int32_t world_size, int64_t index) {
  if (!collective.reduces) return MovementValue(rank, index);
  if (op == ReduceOp::kProduct) return ProductValue(rank, index);
  return ArithmeticValue(rank, world_size, index);
}

double ExpectedValue(const CollectiveDescriptor& collective, ReduceOp op,
                     DataType type, int32_t rank, int32_t world_size,
                     int32_t root, int64_t call_count, int64_t recv_index) {
  const Source source = collective.source(recv_index, call_count, rank, root);
  if (source.rank != Source::kEveryRank) {
    return InputValue(collective, op, source.rank, world_size, source.index);
  }
  double result = InputValue(collective, op, 0, world_size, source.index);
  for (int32_t r = 1; r < world_size; ++r) {
    result = Reduce(op, result,
                    InputValue(collective, op, r, world_size, source.index));
  }
  if (op == ReduceOp::kAverage) {
    result /= world_size;
    if (!IsFloatingPoint(type)) result = std::trunc(result);
  }
  return result;
}

double LoadElement(DataType type, const void* data, int64_t index) {
  switch (type) {
    case DataType::kFloat32: return static_cast<const float*>(data)[index];
    case DataType::kFloat64: return static_cast<const double*>(data)[index];
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[index]);
    case DataType::kBFloat16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(data)[index]);
    case DataType::kInt8: return static_cast<const int8_t*>(data)[index];
    case DataType::kUInt8: return static_cast<const uint8_t*>(data)[index];
    case DataType::kInt32: return static_cast<const int32_t*>(data)[index];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(data)[index]);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void StoreElement(DataType type, void* data, int64_t index, double value) {
  switch (type) {
    case DataType::kFloat32:
      static_cast<float*>(data)[index] = static_cast<float>(value);
      return;
    case DataType::kFloat64: static_cast<double*>(data)[index] = value; return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(data)[index] =
          FloatToHalf(static_cast<float>(value));
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(data)[index] =
          FloatToBFloat16(static_cast<float>(value));
      return;
    case DataType::kInt8:
      static_cast<int8_t*>(data)[index] = static_cast<int8_t>(value);
      return;
    case DataType::kUInt8:
      static_cast<uint8_t*>(data)[index] = static_cast<uint8_t>(value);
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(data)[index] = static_cast<int32_t>(value);
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(data)[index] = static_cast<int64_t>(value);
      return;
  }
}

void FillInputs(const CollectiveDescriptor& collective, ReduceOp op,
                DataType type, int32_t rank, int32_t world_size, void* data,
                int64_t elements) {
  for (int64_t i = 0; i < elements; ++i) {
    StoreElement(type, data, i,
                 InputValue(collective, op, rank, world_size, i));
  }
}

int64_t CountWrong(const CollectiveDescriptor& collective, ReduceOp op,
                   DataType type, int32_t rank, int32_t world_size,
                   int32_t root, int64_t call_count, const void* recv,
                   int64_t elements) {
  int64_t wrong = 0;
  for (int64_t k = 0; k < elements; ++k) {
    const double expected = ExpectedValue(collective, op, type, rank,
                                          world_size, root, call_count, k);
    // Every expected value is a small integer, exact in every type, so
    // anything but equality is a wrong result.
    if (LoadElement(type, recv, k) != expected) ++wrong;
  }
  return wrong;
}

double Bandwidth(int64_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) / seconds / 1e9;
}

StatusOr<CollectivesConfig> ParseCollectivesFlags(
    const CollectivesFlags& flags) {
  CollectivesConfig config;
  config.min_bytes = flags.min_bytes;
  config.max_bytes = flags.max_bytes;
  if (config.min_bytes > config.max_bytes) {
    return InvalidArgument(
        fmt::format("--minbytes {} is larger than --maxbytes {}",
                    flags.min_bytes, flags.max_bytes));
  }
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--stepfactor", flags.step_factor, 2));
  config.step_factor = flags.step_factor;

  for (const std::string& name : SplitList(flags.ops)) {
    StatusOr<const CollectiveDescriptor*> collective = FindCollective(name);
    if (!collective.ok()) return collective.status().WithContext("--ops");
    if (std::find(config.collectives.begin(), config.collectives.end(),
                  *collective) == config.collectives.end()) {
      config.collectives.push_back(*collective);
    }
  }
  if (config.collectives.empty()) {
    return InvalidArgument(
        fmt::format("--ops '{}' names no collective (expected {})", flags.ops,
                    CollectiveNames()));
  }

  if (flags.dtypes == "all") {
    config.types = AllDataTypes();
  } else {
    for (const std::string& name : SplitList(flags.dtypes)) {
      StatusOr<DataType> type = ParseDataType(name);
      if (!type.ok()) return type.status().WithContext("--dtype");
      if (std::find(config.types.begin(), config.types.end(), *type) ==
          config.types.end()) {
        config.types.push_back(*type);
      }
    }
  }
  if (config.types.empty()) {
    return InvalidArgument(
        fmt::format("--dtype '{}' names no data type", flags.dtypes));
  }

  StatusOr<ReduceOp> op = ParseReduceOp(flags.op);
  if (!op.ok()) return op.status().WithContext("--op");
  config.op = *op;

  KOLO_RETURN_IF_ERROR(CheckAtLeast("--root", flags.root, 0));
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--iters", flags.iters, 1));
  KOLO_RETURN_IF_ERROR(CheckAtLeast("--warmup", flags.warmup, 0));
  if (flags.check != 0 && flags.check != 1) {
    return InvalidArgument(
        fmt::format("--check {} must be 0 or 1", flags.check));
  }
  config.root = flags.root;
  config.iters = flags.iters;
  config.warmup = flags.warmup;
  config.check = flags.check == 1;
  config.json_path = flags.json_path;
  KOLO_ASSIGN_OR_RETURN(config.peers, ParsePeerList(flags.peers));
  return config;
}

int64_t ProcessContextSwitches() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_nvcsw) +
         static_cast<int64_t>(usage.ru_nivcsw);
}

Measurement MakeMeasurement(int64_t bytes, double seconds, double bus_factor,
                            std::optional<int64_t> wrong) {
  Measurement m;
  m.time_us = seconds * 1e6;
  m.algbw_gbps = Bandwidth(bytes, seconds);
  m.busbw_gbps = m.algbw_gbps * bus_factor;
  m.wrong = wrong;
  return m;
}

Table CollectivesTable() {
  std::vector<Table::Column> columns = {
      {"collective", "", 13, "", true},
      {"size", "(B)", 12, "", false},
      {"count", "(elements)", 12, "", false},
      {"type", "", 8, "", false},
      {"redop", "", 6, "", false},
      {"root", "", 5, "", false},
  };
  for (const char* group : {"out-of-place", "in-place"}) {
    columns.push_back({"time", "(us)", 10, group, false});
    columns.push_back({"algbw", "(GB/s)", 7, group, false});
    columns.push_back({"busbw", "(GB/s)", 7, group, false});
    columns.push_back({"#wrong", "", 6, group, false});
  }
  return Table(std::move(columns));
}

std::vector<std::string> RowCells(const ResultRow& row) {
  std::vector<std::string> cells = {
      row.collective,
      std::to_string(row.bytes),
      std::to_string(row.elements),
      DataTypeName(row.type),
      row.op ? ReduceOpName(*row.op) : "none",
      std::to_string(row.root),
  };
  for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
    cells.push_back(FormatFixed(m->time_us, 2));
    cells.push_back(FormatFixed(m->algbw_gbps, 2));
    cells.push_back(FormatFixed(m->busbw_gbps, 2));
    cells.push_back(m->wrong ? std::to_string(*m->wrong) : "n/a");
  }
  return cells;
}

int64_t TotalWrong(const std::vector<ResultRow>& rows) {
  int64_t wrong = 0;
  for (const ResultRow& row : rows) {
    wrong +=
        row.out_of_place.wrong.value_or(0) + row.in_place.wrong.value_or(0);
  }
  return wrong;
}

double AverageBusBandwidth(const std::vector<ResultRow>& rows) {
  if (rows.empty()) return 0;
  double total = 0;
  for (const ResultRow& row : rows) {
    total += row.out_of_place.busbw_gbps + row.in_place.busbw_gbps;
  }
  return total / (2.0 * rows.size());
}

nlohmann::json ResultsToJson(const CollectivesConfig& config,
                             BackendKind backend, int32_t world_size,
                             const std::vector<ResultRow>& rows,
                             const std::vector<PeerResults>& peers,
                             const std::vector<MemcpyPoint>& memcpy) {
  auto measurement = [](const Measurement& m) {
    nlohmann::json json = {{"time_us", m.time_us},
                           {"algbw_gbps", m.algbw_gbps},
                           {"busbw_gbps", m.busbw_gbps},
                           {"wrong", nullptr},
                           {"switches_per_call", m.switches_per_call}};
    if (m.wrong) json["wrong"] = *m.wrong;
    return json;
  };
  auto rows_to_json = [&](const std::vector<ResultRow>& rows) {
    nlohmann::json json_rows = nlohmann::json::array();
    for (const ResultRow& row : rows) {
      json_rows.push_back({
          {"collective", row.collective},
          {"size", row.bytes},
          {"count", row.elements},
          {"type", DataTypeName(row.type)},
          {"redop", row.op ? ReduceOpName(*row.op) : "none"},
          {"root", row.root},
          {"out_of_place", measurement(row.out_of_place)},
          {"in_place", measurement(row.in_place)},
      });
    }
    return json_rows;
  };
  int64_t wrong = TotalWrong(rows);
  for (const PeerResults& peer : peers) wrong += TotalWrong(peer.rows);
  nlohmann::json json = {
      {"benchmark", "collectives"},
      {"backend", BackendName(backend)},
      {"np", world_size},
      {"config",
       {
           {"minbytes", config.min_bytes},
           {"maxbytes", config.max_bytes},
           {"stepfactor", config.step_factor},
           {"ops", CollectiveNameList(config)},
           {"dtypes", TypeNameList(config)},
           {"redop", ReduceOpName(config.op)},
           {"root", config.root},
           {"iters", config.iters},
           {"warmup", config.warmup},
           {"check", config.check},
           {"peers", PeerNameList(config)},
       }},
      {"rows", rows_to_json(rows)},
      {"out_of_bounds", wrong},
      {"avg_busbw_gbps", AverageBusBandwidth(rows)},
  };
  if (!config.peers.empty()) {
    nlohmann::json json_peers = nlohmann::json::array();
    for (const PeerResults& peer : peers) {
      json_peers.push_back({{"engine", BackendName(peer.engine)},
                            {"rows", rows_to_json(peer.rows)}});
    }
    nlohmann::json json_memcpy = nlohmann::json::array();
    for (const MemcpyPoint& point : memcpy) {
      json_memcpy.push_back({{"size", point.bytes}, {"gbps", point.gbps}});
    }
    json["peers"] = std::move(json_peers);
    json["memcpy_2thread"] = std::move(json_memcpy);
  }
  return json;
}

CLI::App* AddCollectivesCommand(CLI::App& parent, CollectivesFlags* flags) {
  CLI::App* command = parent.add_subcommand(
      "collectives",
      "Time and check every collective over a sweep of message sizes "
      "(nccl-tests style). Exit status: 0 all right, 1 error, 2 wrong "
      "results.");
  AddByteSizeFlag(command, "-b,--minbytes", &flags->min_bytes,
                  "Smallest size in bytes (K/M/G suffixes)");
  AddByteSizeFlag(command, "-e,--maxbytes", &flags->max_bytes,
                  "Largest size in bytes (K/M/G suffixes)");
  command
      ->add_option("-f,--stepfactor", flags->step_factor,
                   "Multiply the size by this between rows")
      ->capture_default_str();
  command->add_option("--ops", flags->ops, "Comma-separated collectives to run")
      ->capture_default_str();
  command
      ->add_option("-d,--dtype", flags->dtypes,
                   "Comma-separated data types, or 'all'")
      ->capture_default_str();
  command
      ->add_option("-o,--op", flags->op,
                   "Reduction for allreduce and reducescatter: "
                   "sum|avg|min|max|prod")
      ->capture_default_str();
  command->add_option("-r,--root", flags->root, "Root rank of broadcast")
      ->capture_default_str();
  command
      ->add_option("-n,--iters", flags->iters,
                   "Timed iterations per size (capped at 1 GiB moved)")
      ->capture_default_str();
  command
      ->add_option("-w,--warmup", flags->warmup,
                   "Untimed iterations per size (capped likewise)")
      ->capture_default_str();
  command
      ->add_option("-c,--check", flags->check,
                   "Check results against their closed form (0 or 1)")
      ->capture_default_str();
  command->add_option(
      "--peer", flags->peers,
      "Also time every row straight on these engines, without kolo's runtime: "
      "mpi,gloo,shm,tcp (comma-separated; mpi needs kolorun --launcher "
      "mpirun). Adds a 2-thread memcpy line and a comparison table");
  AddRankZeroRecordFlag(command, &flags->json_path);
  return command;
}

int RunCollectivesCommand(const CollectivesFlags& flags) {
  StatusOr<CollectivesConfig> config = ParseCollectivesFlags(flags);
  if (!config.ok()) return Fail(config.status());
  // Before kolo::Init(), see raw_backend.h.
  std::unique_ptr<Backend> mpi_peer;
  if (std::find(config->peers.begin(), config->peers.end(),
                BackendKind::kMpi) != config->peers.end()) {
    StatusOr<std::unique_ptr<Backend>> mpi = CreateRawMpiBackend();
    if (!mpi.ok()) return Fail(mpi.status().WithContext("--peer mpi"));
    mpi_peer = std::move(mpi).value();
  }
  Status init = Init();
  if (!init.ok()) return Fail(init);
  StatusOr<bool> all_right = RunCollectives(*config, std::move(mpi_peer));
  // Shut down even after an error, so a failed run still leaves the job
  // cleanly; the first error is the one worth reporting.
  Status shutdown = Shutdown();
  if (!all_right.ok()) return Fail(all_right.status());
  if (!shutdown.ok()) return Fail(shutdown);
  return *all_right ? 0 : 2;
}

}  // namespace kolo::bench
