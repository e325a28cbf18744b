#include "peers.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "list_flag.h"

namespace kolo::bench {
namespace {

using Clock = std::chrono::steady_clock;

bool SameRow(const ResultRow& a, const ResultRow& b) {
  return a.collective == b.collective && a.bytes == b.bytes && a.type == b.type;
}

// Two decimals, but three significant digits below 1, where kolo's busbw
// over a cache-resident memcpy is often a few thousandths.
std::string FormatRatio(double ratio) {
  if (ratio >= 1 || ratio <= 0) return FormatFixed(ratio, 2);
  return fmt::format("{:.3g}", ratio);
}

std::string Ratio(std::optional<double> ratio) {
  return ratio ? FormatRatio(*ratio) : "-";
}

}  // namespace

StatusOr<std::vector<BackendKind>> ParsePeerList(const std::string& text) {
  std::vector<BackendKind> peers;
  for (const std::string& item : SplitList(text)) {
    StatusOr<BackendKind> kind = ParseBackend(item);
    if (!kind.ok()) {
      return InvalidArgument(
          fmt::format("--peer: unknown engine '{}' in '{}' (expected mpi, "
                      "gloo, shm or tcp)",
                      item, text));
    }
    if (std::find(peers.begin(), peers.end(), *kind) == peers.end()) {
      peers.push_back(*kind);
    }
  }
  return peers;
}

double Memcpy2ThreadGbps(int64_t bytes, int64_t bytes_moved) {
  if (bytes <= 0) return 0;
  const int64_t copies =
      std::max<int64_t>(1, (bytes_moved + bytes - 1) / bytes);
  // Filled, so the pages are mapped before anything is timed.
  std::vector<unsigned char> from(bytes, 1);
  std::vector<unsigned char> to(bytes, 0);
  const int64_t half = bytes / 2;
  auto copy = [&](int64_t begin, int64_t end) {
    for (int64_t i = 0; i < copies; ++i) {
      std::memcpy(to.data() + begin, from.data() + begin, end - begin);
      // Tells the compiler the copy is read, so it keeps every one.
      asm volatile("" : : "r"(to.data()) : "memory");
    }
  };
  // The helper thread starts before the clock and spins on `go`, so thread
  // creation is not timed; the clock stops once both halves are copied.
  std::atomic<bool> go{false};
  std::thread helper([&] {
    while (!go.load(std::memory_order_acquire)) {
    }
    copy(half, bytes);
  });
  const Clock::time_point start = Clock::now();
  go.store(true, std::memory_order_release);
  copy(0, half);
  helper.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  return Bandwidth(bytes * copies, seconds);
}

std::optional<double> KoloRatio(const Measurement& kolo,
                                const Measurement& peer) {
  if (kolo.time_us <= 0 || peer.time_us <= 0) return std::nullopt;
  return peer.time_us / kolo.time_us;
}

std::vector<ComparisonRow> Compare(const std::vector<ResultRow>& kolo,
                                   const std::vector<PeerResults>& peers,
                                   const std::vector<MemcpyPoint>& memcpy) {
  std::vector<ComparisonRow> rows;
  for (const ResultRow& mine : kolo) {
    ComparisonRow row;
    row.collective = mine.collective;
    row.bytes = mine.bytes;
    row.type = mine.type;
    row.kolo = mine.in_place;
    for (size_t p = 0; p < peers.size(); ++p) {
      std::optional<Measurement> match;
      for (const ResultRow& theirs : peers[p].rows) {
        if (SameRow(mine, theirs)) match = theirs.in_place;
      }
      row.peers.push_back(match);
      if (match && (!row.best_peer ||
                    match->time_us < row.peers[*row.best_peer]->time_us)) {
        row.best_peer = p;
      }
    }
    for (const MemcpyPoint& point : memcpy) {
      if (point.bytes == mine.bytes) row.memcpy_gbps = point.gbps;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

// The columns and cells that name a row, first in both tables.
std::vector<Table::Column> RowNameColumns() {
  return {{"collective", "", 13, "", true},
          {"size", "(B)", 11, "", false},
          {"type", "", 8, "", false}};
}

std::vector<std::string> RowNameCells(const ComparisonRow& row) {
  return {row.collective, std::to_string(row.bytes), DataTypeName(row.type)};
}

}  // namespace

Table ComparisonTable(const std::vector<BackendKind>& peers) {
  std::vector<Table::Column> columns = RowNameColumns();
  columns.push_back({"time", "(us)", 10, "kolo", false});
  columns.push_back({"busbw", "(GB/s)", 7, "kolo", false});
  for (BackendKind peer : peers) {
    const std::string name = BackendName(peer);
    columns.push_back({"time", "(us)", 10, name, false});
    columns.push_back({"busbw", "(GB/s)", 7, name, false});
    columns.push_back({"kolo/" + name, "", 9, name, false});
  }
  columns.push_back({"copy", "(GB/s)", 7, "memcpy2t", false});
  columns.push_back({"kolo/", "", 8, "memcpy2t", false});
  columns.push_back({"peer", "", 4, "best peer", false});
  columns.push_back({"kolo/", "", 8, "best peer", false});
  return Table(std::move(columns));
}

std::vector<std::string> ComparisonCells(
    const ComparisonRow& row, const std::vector<BackendKind>& peers) {
  std::vector<std::string> cells = RowNameCells(row);
  cells.push_back(FormatFixed(row.kolo.time_us, 2));
  cells.push_back(FormatFixed(row.kolo.busbw_gbps, 2));
  for (size_t p = 0; p < peers.size(); ++p) {
    const std::optional<Measurement>& peer =
        p < row.peers.size() ? row.peers[p] : std::nullopt;
    if (!peer) {
      cells.insert(cells.end(), {"-", "-", "-"});
      continue;
    }
    cells.push_back(FormatFixed(peer->time_us, 2));
    cells.push_back(FormatFixed(peer->busbw_gbps, 2));
    cells.push_back(Ratio(KoloRatio(row.kolo, *peer)));
  }
  if (row.memcpy_gbps && *row.memcpy_gbps > 0) {
    cells.push_back(FormatFixed(*row.memcpy_gbps, 2));
    cells.push_back(FormatRatio(row.kolo.busbw_gbps / *row.memcpy_gbps));
  } else {
    cells.insert(cells.end(), {"-", "-"});
  }
  if (row.best_peer && *row.best_peer < peers.size()) {
    cells.push_back(BackendName(peers[*row.best_peer]));
    cells.push_back(Ratio(KoloRatio(row.kolo, *row.peers[*row.best_peer])));
  } else {
    cells.insert(cells.end(), {"-", "-"});
  }
  return cells;
}

Table SwitchesTable(const std::vector<BackendKind>& peers) {
  std::vector<Table::Column> columns = RowNameColumns();
  columns.push_back({"kolo", "", 9, "switches per call", false});
  for (BackendKind peer : peers) {
    columns.push_back({BackendName(peer), "", 9, "switches per call", false});
  }
  return Table(std::move(columns));
}

std::vector<std::string> SwitchesCells(const ComparisonRow& row,
                                       const std::vector<BackendKind>& peers) {
  std::vector<std::string> cells = RowNameCells(row);
  cells.push_back(FormatFixed(row.kolo.switches_per_call, 1));
  for (size_t p = 0; p < peers.size(); ++p) {
    const std::optional<Measurement>& peer =
        p < row.peers.size() ? row.peers[p] : std::nullopt;
    cells.push_back(peer ? FormatFixed(peer->switches_per_call, 1) : "-");
  }
  return cells;
}

}  // namespace kolo::bench
