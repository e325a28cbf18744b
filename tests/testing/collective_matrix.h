// Checks every collective against closed-form expected values, for any API
// object with kolo.h's collective signatures (kolo::Communicator in the
// thread tests, the public free functions in the multi-process tests).
//
// Inputs are small integers chosen so that every data type holds every
// input, partial result and answer exactly, so comparisons are exact:
//   reductions  v(r, i) = size * (i % 7 + 1) + 2r - (size - 1); the 2r terms
//               cancel in the sum, so sum = size^2 (i % 7 + 1) and the
//               average size (i % 7 + 1) are exact; min and max differ from
//               the base by (size - 1). Product inputs are (r + i) % 2 + 1.
//   gathers     (5r + i) % 100, broadcast (7i + root) % 100,
//   alltoall    (13 source + 7 destination + k) % 100.
#ifndef KOLO_TESTS_TESTING_COLLECTIVE_MATRIX_H_
#define KOLO_TESTS_TESTING_COLLECTIVE_MATRIX_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kolo/kolo.h"

namespace kolo::testing {

inline double Load(DataType type, const void* data, int64_t i) {
  const char* p = static_cast<const char*>(data);
  switch (type) {
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DataType::kFloat64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case DataType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return HalfToFloat(v);
    }
    case DataType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return BFloat16ToFloat(v);
    }
    case DataType::kInt8: return static_cast<const int8_t*>(data)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(data)[i];
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DataType::kInt64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<double>(v);
    }
  }
  return 0;
}

inline void StoreValue(DataType type, void* data, int64_t i, double value) {
  char* p = static_cast<char*>(data);
  switch (type) {
    case DataType::kFloat32: {
      float v = static_cast<float>(value);
      std::memcpy(p + 4 * i, &v, 4);
      return;
    }
    case DataType::kFloat64: std::memcpy(p + 8 * i, &value, 8); return;
    case DataType::kFloat16: {
      uint16_t v = FloatToHalf(static_cast<float>(value));
      std::memcpy(p + 2 * i, &v, 2);
      return;
    }
    case DataType::kBFloat16: {
      uint16_t v = FloatToBFloat16(static_cast<float>(value));
      std::memcpy(p + 2 * i, &v, 2);
      return;
    }
    case DataType::kInt8:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(value);
      return;
    case DataType::kUInt8:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(value);
      return;
    case DataType::kInt32: {
      int32_t v = static_cast<int32_t>(value);
      std::memcpy(p + 4 * i, &v, 4);
      return;
    }
    case DataType::kInt64: {
      int64_t v = static_cast<int64_t>(value);
      std::memcpy(p + 8 * i, &v, 8);
      return;
    }
  }
}

inline double ReductionInput(ReduceOp op, int32_t rank, int32_t size,
                             int64_t i) {
  if (op == ReduceOp::kProduct) return (rank + i) % 2 + 1;
  return size * (i % 7 + 1) + 2 * rank - (size - 1);
}

inline double ReductionExpected(ReduceOp op, int32_t size, int64_t i) {
  const double base = size * (i % 7 + 1);
  switch (op) {
    case ReduceOp::kSum: return base * size;
    case ReduceOp::kAverage: return base;
    case ReduceOp::kMin: return base - (size - 1);
    case ReduceOp::kMax: return base + (size - 1);
    case ReduceOp::kProduct: {
      double product = 1;
      for (int32_t r = 0; r < size; ++r) product *= (r + i) % 2 + 1;
      return product;
    }
  }
  return 0;
}

inline double GatherValue(int32_t rank, int64_t i) {
  return (5 * rank + i) % 100;
}
inline double BroadcastValue(int32_t root, int64_t i) {
  return (7 * i + root) % 100;
}
inline double AlltoallValue(int32_t from, int32_t to, int64_t k) {
  return (13 * from + 7 * to + k) % 100;
}

// Collects failures as readable strings ("allreduce sum float16 count 7
// in-place: element 3 is 5, expected 6"), stopping after a few per case.
class Failures {
 public:
  void Add(const std::string& what) { items_.push_back(what); }
  const std::vector<std::string>& items() const { return items_; }
  std::string Summary() const {
    std::string text;
    for (size_t i = 0; i < items_.size() && i < 20; ++i)
      text += items_[i] + "\n";
    if (items_.size() > 20)
      text += "... and " + std::to_string(items_.size() - 20) + " more\n";
    return text;
  }

 private:
  std::vector<std::string> items_;
};

// Compares `count` elements of `data` with expected(i); records at most one
// failure (the first wrong element and how many were wrong).
template <typename Expected>
void Verify(Failures* failures, const std::string& what, DataType type,
            const void* data, int64_t count, Expected expected) {
  int64_t wrong = 0;
  std::string first;
  for (int64_t i = 0; i < count; ++i) {
    const double got = Load(type, data, i);
    const double want = expected(i);
    if (got != want) {
      if (wrong++ == 0) {
        first = "element " + std::to_string(i) + " is " + std::to_string(got) +
                ", expected " + std::to_string(want);
      }
    }
  }
  if (wrong > 0) {
    failures->Add(what + ": " + std::to_string(wrong) + " wrong, " + first);
  }
}

inline double Truncate(DataType type, double value) {
  return IsFloatingPoint(type)
             ? value
             : static_cast<double>(static_cast<int64_t>(value));
}

// Runs every collective for one data type and element count, in place and
// out of place, on `api`; returns what went wrong (empty when all is well).
template <typename Api>
Failures RunCollectiveMatrix(Api& api, const WorldInfo& world, DataType type,
                             int64_t count) {
  Failures failures;
  const int32_t rank = world.rank;
  const int32_t size = world.size;
  const int64_t element = DataTypeSize(type);
  const std::string suffix =
      std::string(" ") + DataTypeName(type) + " count " + std::to_string(count);
  auto bytes = [&](int64_t n) { return static_cast<size_t>(n * element); };
  auto check_status = [&](const Status& s, const std::string& what) {
    if (!s.ok()) failures.Add(what + ": " + s.ToString());
    return s.ok();
  };

  for (bool in_place : {false, true}) {
    const std::string placement = in_place ? " in-place" : " out-of-place";

    for (ReduceOp op : AllReduceOps()) {
      // allreduce
      const std::string what =
          std::string("allreduce ") + ReduceOpName(op) + suffix + placement;
      std::vector<char> send(bytes(count)), recv(bytes(count));
      for (int64_t i = 0; i < count; ++i) {
        StoreValue(type, send.data(), i, ReductionInput(op, rank, size, i));
      }
      void* out = in_place ? send.data() : recv.data();
      if (check_status(api.Allreduce(send.data(), out, count, type, op),
                       what)) {
        Verify(&failures, what, type, out, count, [&](int64_t i) {
          return op == ReduceOp::kAverage
                     ? Truncate(type, ReductionExpected(op, size, i))
                     : ReductionExpected(op, size, i);
        });
      }

      // reducescatter: block j of the input is element j*count + k.
      const std::string rs_what =
          std::string("reducescatter ") + ReduceOpName(op) + suffix + placement;
      std::vector<char> rs_send(bytes(count * size)), rs_recv(bytes(count));
      for (int64_t i = 0; i < count * size; ++i) {
        StoreValue(type, rs_send.data(), i, ReductionInput(op, rank, size, i));
      }
      void* rs_out =
          in_place ? rs_send.data() + bytes(rank * count) : rs_recv.data();
      if (check_status(
              api.Reducescatter(rs_send.data(), rs_out, count, type, op),
              rs_what)) {
        Verify(&failures, rs_what, type, rs_out, count, [&](int64_t k) {
          const double e = ReductionExpected(op, size, rank * count + k);
          return op == ReduceOp::kAverage ? Truncate(type, e) : e;
        });
      }
    }

    {  // allgather
      const std::string what = "allgather" + suffix + placement;
      std::vector<char> send(bytes(count)), recv(bytes(count * size));
      char* mine = in_place ? recv.data() + bytes(rank * count) : send.data();
      for (int64_t i = 0; i < count; ++i)
        StoreValue(type, mine, i, GatherValue(rank, i));
      if (check_status(api.Allgather(mine, recv.data(), count, type), what)) {
        Verify(&failures, what, type, recv.data(), count * size,
               [&](int64_t i) {
                 return GatherValue(static_cast<int32_t>(i / count), i % count);
               });
      }
    }

    {  // broadcast from the last rank, so a nonzero root is exercised
      const int32_t root = size - 1;
      const std::string what = "broadcast" + suffix + placement;
      std::vector<char> send(bytes(count)), recv(bytes(count));
      for (int64_t i = 0; i < count; ++i) {
        StoreValue(type, send.data(), i,
                   rank == root ? BroadcastValue(root, i) : 111);
        StoreValue(type, recv.data(), i, 112);
      }
      void* out = in_place ? send.data() : recv.data();
      if (check_status(api.Broadcast(send.data(), out, count, type, root),
                       what)) {
        Verify(&failures, what, type, out, count,
               [&](int64_t i) { return BroadcastValue(root, i); });
      }
    }

    {  // alltoall
      const std::string what = "alltoall" + suffix + placement;
      std::vector<char> send(bytes(count * size)), recv(bytes(count * size));
      for (int32_t to = 0; to < size; ++to) {
        for (int64_t k = 0; k < count; ++k) {
          StoreValue(type, send.data(), to * count + k,
                     AlltoallValue(rank, to, k));
        }
      }
      void* out = in_place ? send.data() : recv.data();
      if (check_status(api.Alltoall(send.data(), out, count, type), what)) {
        Verify(&failures, what, type, out, count * size, [&](int64_t i) {
          return AlltoallValue(static_cast<int32_t>(i / count), rank,
                               i % count);
        });
      }
    }
  }

  {  // allgatherv: rank r contributes count + r elements
    const std::string what = "allgatherv" + suffix;
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (int32_t r = 0; r < size; ++r) {
      counts.push_back(count == 0 ? 0 : count + r);
      total += counts.back();
    }
    std::vector<char> send(bytes(counts[rank])), recv(bytes(total));
    for (int64_t i = 0; i < counts[rank]; ++i)
      StoreValue(type, send.data(), i, GatherValue(rank, i));
    if (check_status(api.Allgatherv(send.data(), counts[rank], recv.data(),
                                    counts, type),
                     what)) {
      int64_t offset = 0;
      for (int32_t r = 0; r < size; ++r) {
        Verify(&failures, what + " block of rank " + std::to_string(r), type,
               recv.data() + bytes(offset), counts[r],
               [&](int64_t i) { return GatherValue(r, i); });
        offset += counts[r];
      }
    }
  }

  {  // alltoallv: rank i sends count + (i + j) % 2 elements to rank j
    const std::string what = "alltoallv" + suffix;
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (int32_t j = 0; j < size; ++j) {
      counts.push_back(count == 0 ? 0 : count + (rank + j) % 2);
      total += counts.back();
    }
    std::vector<char> send(bytes(total)), recv(bytes(total));
    int64_t offset = 0;
    for (int32_t to = 0; to < size; ++to) {
      for (int64_t k = 0; k < counts[to]; ++k) {
        StoreValue(type, send.data(), offset + k, AlltoallValue(rank, to, k));
      }
      offset += counts[to];
    }
    if (check_status(
            api.Alltoallv(send.data(), counts, recv.data(), counts, type),
            what)) {
      offset = 0;
      for (int32_t from = 0; from < size; ++from) {
        Verify(&failures, what + " block from rank " + std::to_string(from),
               type, recv.data() + bytes(offset), counts[from],
               [&](int64_t k) { return AlltoallValue(from, rank, k); });
        offset += counts[from];
      }
    }
  }

  check_status(api.Barrier(), "barrier" + suffix);
  return failures;
}

// kolo.h's free functions behind the same method names as Communicator.
struct ProcessApi {
  Status Allreduce(const void* s, void* r, int64_t n, DataType t, ReduceOp op) {
    return kolo::Allreduce(s, r, n, t, op);
  }
  Status Allgather(const void* s, void* r, int64_t n, DataType t) {
    return kolo::Allgather(s, r, n, t);
  }
  Status Allgatherv(const void* s, int64_t n, void* r,
                    const std::vector<int64_t>& c, DataType t) {
    return kolo::Allgatherv(s, n, r, c, t);
  }
  Status Broadcast(const void* s, void* r, int64_t n, DataType t,
                   int32_t root) {
    return kolo::Broadcast(s, r, n, t, root);
  }
  Status Alltoall(const void* s, void* r, int64_t n, DataType t) {
    return kolo::Alltoall(s, r, n, t);
  }
  Status Alltoallv(const void* s, const std::vector<int64_t>& sc, void* r,
                   const std::vector<int64_t>& rc, DataType t) {
    return kolo::Alltoallv(s, sc, r, rc, t);
  }
  Status Reducescatter(const void* s, void* r, int64_t n, DataType t,
                       ReduceOp op) {
    return kolo::Reducescatter(s, r, n, t, op);
  }
  Status Barrier() { return kolo::Barrier(); }
};

}  // namespace kolo::testing

#endif  // KOLO_TESTS_TESTING_COLLECTIVE_MATRIX_H_
