// A rank of the point-to-point tests (tests/integration/point_to_point_test.cc).
//   exchange   every type to both ring neighbours at once, tags out of order,
//              a message larger than a shm ring, a mismatch, and two process
//              groups (even and odd ranks) with collectives and transfers
//   die        rank 1 is killed; the others receive from it, then from each
//              other
//   freeze     rank 1 stops (SIGSTOP); rank 0 receives from it
// Exit codes: 0 as expected, 1 wrong result or unexpected error, 2 bad
// usage, 3 the expected error was reported (die, freeze).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/point_to_point.h"

namespace {

#define CHECK_OK(expr)                                                      \
  do {                                                                      \
    kolo::Status s_ = (expr);                                               \
    if (!s_.ok()) {                                                         \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", kolo::Rank(), #expr, \
                   s_.ToString().c_str());                                  \
      return 1;                                                             \
    }                                                                       \
  } while (0)

#define EXPECT_TRUE_OR_FAIL(cond, what)                                 \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::fprintf(stderr, "rank %d: wrong: %s\n", kolo::Rank(), what); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

// Byte j of the message rank `from` sends with `tag`: a closed form.
unsigned char Byte(int from, int tag, int64_t j) {
  return static_cast<unsigned char>((from * 31 + tag * 7 + j) % 251);
}

int Exchange() {
  const int rank = kolo::Rank();
  const int size = kolo::Size();
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;
  // Every type, both directions at once, sends waited first.
  int tag = 0;
  for (kolo::DataType type : kolo::AllDataTypes()) {
    ++tag;
    const int64_t count = 1000 + tag;
    const int64_t bytes = count * kolo::DataTypeSize(type);
    std::vector<unsigned char> to_right(bytes), to_left(bytes),
        from_left(bytes), from_right(bytes);
    for (int64_t j = 0; j < bytes; ++j) {
      to_right[j] = Byte(rank, tag, j);
      to_left[j] = Byte(rank, tag + 100, j);
    }
    std::vector<kolo::Request> requests;
    auto post = [&](kolo::StatusOr<kolo::Request> r) {
      if (r.ok()) requests.push_back(*r);
      return r.status();
    };
    CHECK_OK(post(kolo::Isend(to_right.data(), count, type, right, tag)));
    CHECK_OK(post(kolo::Isend(to_left.data(), count, type, left, tag + 100)));
    CHECK_OK(post(kolo::Irecv(from_left.data(), count, type, left, tag)));
    CHECK_OK(
        post(kolo::Irecv(from_right.data(), count, type, right, tag + 100)));
    for (const kolo::Request& r : requests) CHECK_OK(r.Wait());
    for (int64_t j = 0; j < bytes; ++j) {
      EXPECT_TRUE_OR_FAIL(from_left[j] == Byte(left, tag, j),
                          kolo::DataTypeName(type));
      EXPECT_TRUE_OR_FAIL(from_right[j] == Byte(right, tag + 100, j),
                          kolo::DataTypeName(type));
    }
  }
  // 6 MiB at once, more than a shm ring holds, with tags received in the
  // other order than sent.
  const int64_t big = 6 << 20;
  std::vector<unsigned char> a(big), b(1000), got_a(big), got_b(1000);
  for (int64_t j = 0; j < big; ++j) a[j] = Byte(rank, 500, j);
  for (int64_t j = 0; j < 1000; ++j) b[j] = Byte(rank, 501, j);
  kolo::StatusOr<kolo::Request> send_a =
      kolo::Isend(a.data(), big, kolo::DataType::kUInt8, right, 500);
  kolo::StatusOr<kolo::Request> send_b =
      kolo::Isend(b.data(), 1000, kolo::DataType::kUInt8, right, 501);
  CHECK_OK(send_a.status());
  CHECK_OK(send_b.status());
  CHECK_OK(kolo::Recv(got_b.data(), 1000, kolo::DataType::kUInt8, left, 501));
  CHECK_OK(kolo::Recv(got_a.data(), big, kolo::DataType::kUInt8, left, 500));
  CHECK_OK(send_a->Wait());
  CHECK_OK(send_b->Wait());
  for (int64_t j = 0; j < big; ++j) {
    EXPECT_TRUE_OR_FAIL(got_a[j] == Byte(left, 500, j), "6 MiB message");
  }
  for (int64_t j = 0; j < 1000; ++j) {
    EXPECT_TRUE_OR_FAIL(got_b[j] == Byte(left, 501, j), "small message");
  }
  // A mismatch between ranks 0 and 1 fails both sides; both carry on.
  if (rank <= 1) {
    std::vector<float> f(10, 1.0f);
    std::vector<double> d(10);
    kolo::Status mismatch =
        rank == 0 ? kolo::Send(f.data(), 10, kolo::DataType::kFloat32, 1, 900)
                  : kolo::Recv(d.data(), 10, kolo::DataType::kFloat64, 0, 900);
    std::printf("rank %d: %s\n", rank, mismatch.ToString().c_str());
    EXPECT_TRUE_OR_FAIL(mismatch.code() == kolo::StatusCode::kMismatch,
                        "mismatch expected");
  }
  // Groups of the even and the odd ranks: a sum of world ranks, a
  // broadcast from group rank 0, and a transfer in group ranks.
  std::vector<int32_t> evens, odds;
  for (int r = 0; r < size; ++r) (r % 2 ? odds : evens).push_back(r);
  kolo::StatusOr<std::shared_ptr<kolo::ProcessGroup>> even_group =
      kolo::NewGroup(evens);
  CHECK_OK(even_group.status());
  kolo::StatusOr<std::shared_ptr<kolo::ProcessGroup>> odd_group =
      odds.empty() ? kolo::StatusOr<std::shared_ptr<kolo::ProcessGroup>>(
                         std::shared_ptr<kolo::ProcessGroup>())
                   : kolo::NewGroup(odds);
  CHECK_OK(odd_group.status());
  std::shared_ptr<kolo::ProcessGroup> mine =
      rank % 2 ? *odd_group : *even_group;
  EXPECT_TRUE_OR_FAIL(mine != nullptr, "member of its group");
  EXPECT_TRUE_OR_FAIL((rank % 2 ? *even_group : *odd_group) == nullptr,
                      "not a member of the other group");
  const std::vector<int32_t>& members = rank % 2 ? odds : evens;
  int64_t expected_sum = 0;
  for (int32_t r : members) expected_sum += r;
  std::vector<int64_t> sum(257, rank);
  CHECK_OK(mine->Allreduce(sum.data(), sum.data(), 257, kolo::DataType::kInt64,
                           kolo::ReduceOp::kSum));
  for (int64_t v : sum) EXPECT_TRUE_OR_FAIL(v == expected_sum, "group sum");
  double average = rank;
  CHECK_OK(mine->Allreduce(&average, &average, 1, kolo::DataType::kFloat64,
                           kolo::ReduceOp::kAverage));
  EXPECT_TRUE_OR_FAIL(average == static_cast<double>(expected_sum) /
                                     static_cast<double>(members.size()),
                      "group average");
  int32_t root_value = mine->rank() == 0 ? 1000 + members.front() : -1;
  CHECK_OK(mine->Broadcast(&root_value, 1, kolo::DataType::kInt32, 0));
  EXPECT_TRUE_OR_FAIL(root_value == 1000 + members.front(), "group broadcast");
  if (mine->size() > 1) {
    const int32_t g = mine->rank();
    const int32_t next = (g + 1) % mine->size();
    const int32_t prev = (g + mine->size() - 1) % mine->size();
    int32_t out = rank, in = -1;
    kolo::StatusOr<kolo::Request> s =
        mine->Isend(&out, 1, kolo::DataType::kInt32, next, 7);
    CHECK_OK(s.status());
    kolo::StatusOr<kolo::Request> r =
        mine->Irecv(&in, 1, kolo::DataType::kInt32, prev, 7);
    CHECK_OK(r.status());
    CHECK_OK(s->Wait());
    CHECK_OK(r->Wait());
    EXPECT_TRUE_OR_FAIL(in == mine->WorldRank(prev), "group transfer");
  }
  CHECK_OK(mine->Barrier());
  std::printf("rank %d: point-to-point correct on %s\n", rank,
              kolo::BackendName(kolo::ActiveBackend()));
  return 0;
}

int Die() {
  const int rank = kolo::Rank();
  CHECK_OK(kolo::Barrier());
  if (rank == 1) raise(SIGKILL);
  int32_t value = 0;
  kolo::Status lost = kolo::Recv(&value, 1, kolo::DataType::kInt32, 1, 0);
  std::fprintf(stderr, "rank %d: %s\n", rank, lost.ToString().c_str());
  if (lost.code() != kolo::StatusCode::kPeerFailure) return 1;
  // The ranks that are left still reach each other.
  const int other = rank == 0 ? 2 : 0;
  int32_t out = rank, in = -1;
  kolo::StatusOr<kolo::Request> s =
      kolo::Isend(&out, 1, kolo::DataType::kInt32, other, 1);
  CHECK_OK(s.status());
  CHECK_OK(kolo::Recv(&in, 1, kolo::DataType::kInt32, other, 1));
  CHECK_OK(s->Wait());
  if (in != other) return 1;
  std::fprintf(stderr, "rank %d: still reaches rank %d\n", rank, other);
  // The ack of the last message this rank took goes out on its writer
  // thread; _exit (which skips Shutdown, whose runtime would wait for rank
  // 1) must not cut it off before the other survivor has it.
  usleep(300 * 1000);
  return 3;
}

int Freeze() {
  const int rank = kolo::Rank();
  CHECK_OK(kolo::Barrier());
  if (rank == 1) {
    raise(SIGSTOP);
    return 0;
  }
  int32_t value = 0;
  kolo::Status frozen = kolo::Recv(&value, 1, kolo::DataType::kInt32, 1, 0);
  std::fprintf(stderr, "rank %d: %s\n", rank, frozen.ToString().c_str());
  return frozen.code() == kolo::StatusCode::kTimeout ? 3 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: point_to_point_worker exchange|die|freeze\n");
    return 2;
  }
  const std::string scenario = argv[1];
  kolo::Status init = kolo::Init();
  if (!init.ok()) {
    std::fprintf(stderr, "kolo::Init failed: %s\n", init.ToString().c_str());
    return 1;
  }
  int code = 2;
  if (scenario == "exchange") code = Exchange();
  if (scenario == "die") code = Die();
  if (scenario == "freeze") code = Freeze();
  // A rank that saw a peer die leaves without the goodbye its peers
  // cannot answer.
  if (code == 3) _exit(code);
  kolo::Status done = kolo::Shutdown();
  if (!done.ok() && code == 0) {
    std::fprintf(stderr, "rank %d: Shutdown: %s\n", kolo::Rank(),
                 done.ToString().c_str());
    return 1;
  }
  return code;
}
