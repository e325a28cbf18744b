// The MPI backend: kolo's collectives on the system's MPI (OpenMPI on
// Debian), so jobs get MPI's process placement and its shared-memory and
// network paths. The world is MPI_COMM_WORLD duplicated, so kolo's traffic
// never mixes with the user's own MPI calls.
//
// MPI has no float16 or bfloat16; those travel as 16-bit integers and reduce
// through user-defined operations that call kolo's kernels. Every other
// type/op pair uses MPI's built-in operations.
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "collectives/backend.h"
#include "collectives/mpi/mpi_bootstrap.h"
#include "common/reduce.h"

namespace kolo {
namespace {

MPI_Datatype ToMpi(DataType type) {
  switch (type) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kFloat16: return MPI_UINT16_T;
    case DataType::kBFloat16: return MPI_UINT16_T;
    case DataType::kInt8: return MPI_INT8_T;
    case DataType::kUInt8: return MPI_UINT8_T;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op BuiltinOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return MPI_SUM;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kProduct: return MPI_PROD;
  }
  return MPI_OP_NULL;
}

// User-defined MPI operations for the 16-bit floats. MPI calls them with no
// context pointer, so each (type, op) pair gets its own function.
template <DataType kType, ReduceOp kOp>
void ReduceHalfLike(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(kType, kOp, inout, inout, in, *len);
}

template <DataType kType>
MPI_User_function* HalfLikeFunction(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return &ReduceHalfLike<kType, ReduceOp::kSum>;
    case ReduceOp::kMin: return &ReduceHalfLike<kType, ReduceOp::kMin>;
    case ReduceOp::kMax: return &ReduceHalfLike<kType, ReduceOp::kMax>;
    case ReduceOp::kProduct: return &ReduceHalfLike<kType, ReduceOp::kProduct>;
  }
  return nullptr;
}

Status CheckMpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return PeerFailure(std::string("MPI ") + what + " failed: " + text);
}

StatusOr<int> ToInt(int64_t value, const char* what) {
  if (value > INT_MAX) {
    return InvalidArgument(std::string(what) + " of " + std::to_string(value) +
                           " elements exceeds the MPI backend's limit of " +
                           std::to_string(INT_MAX));
  }
  return static_cast<int>(value);
}

StatusOr<std::vector<int>> ToInts(const std::vector<int64_t>& values,
                                  const char* what) {
  std::vector<int> result;
  result.reserve(values.size());
  for (int64_t v : values) {
    KOLO_ASSIGN_OR_RETURN(int i, ToInt(v, what));
    result.push_back(i);
  }
  return result;
}

std::vector<int> Displacements(const std::vector<int>& counts) {
  std::vector<int> displacements(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) {
    displacements[i] = displacements[i - 1] + counts[i - 1];
  }
  return displacements;
}

class MpiBackend : public Backend {
 public:
  MpiBackend(const WorldInfo& world, MPI_Comm comm)
      : world_(world), comm_(comm) {
    for (ReduceOp op : AllReduceOps()) {
      MPI_Op_create(HalfLikeFunction<DataType::kFloat16>(op), 1,
                    &half_ops_[static_cast<int>(op)]);
      MPI_Op_create(HalfLikeFunction<DataType::kBFloat16>(op), 1,
                    &bfloat_ops_[static_cast<int>(op)]);
    }
  }

  ~MpiBackend() override {
    for (MPI_Op& op : half_ops_) MPI_Op_free(&op);
    for (MPI_Op& op : bfloat_ops_) MPI_Op_free(&op);
    MPI_Comm_free(&comm_);
  }

  Status Allreduce(const void* send, void* recv, int64_t count, DataType type,
                   ReduceOp op) override {
    KOLO_ASSIGN_OR_RETURN(int n, ToInt(count, "allreduce"));
    return CheckMpi(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n,
                                  ToMpi(type), OpFor(type, op), comm_),
                    "allreduce");
  }

  Status Allgatherv(const void* send, void* recv,
                    const std::vector<int64_t>& counts,
                    DataType type) override {
    KOLO_ASSIGN_OR_RETURN(std::vector<int> n, ToInts(counts, "allgatherv"));
    std::vector<int> displacements = Displacements(n);
    const char* own_slot =
        static_cast<const char*>(recv) +
        int64_t{displacements[world_.rank]} * DataTypeSize(type);
    return CheckMpi(MPI_Allgatherv(send == own_slot ? MPI_IN_PLACE : send,
                                   n[world_.rank], ToMpi(type), recv, n.data(),
                                   displacements.data(), ToMpi(type), comm_),
                    "allgatherv");
  }

  Status Broadcast(void* buffer, int64_t count, DataType type,
                   int32_t root) override {
    KOLO_ASSIGN_OR_RETURN(int n, ToInt(count, "broadcast"));
    return CheckMpi(MPI_Bcast(buffer, n, ToMpi(type), root, comm_),
                    "broadcast");
  }

  Status Alltoallv(const void* send, const std::vector<int64_t>& send_counts,
                   void* recv, const std::vector<int64_t>& recv_counts,
                   DataType type) override {
    KOLO_ASSIGN_OR_RETURN(std::vector<int> s, ToInts(send_counts, "alltoallv"));
    KOLO_ASSIGN_OR_RETURN(std::vector<int> r, ToInts(recv_counts, "alltoallv"));
    std::vector<int> sd = Displacements(s);
    std::vector<int> rd = Displacements(r);
    if (send == recv) {
      return CheckMpi(
          MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, ToMpi(type), recv,
                        r.data(), rd.data(), ToMpi(type), comm_),
          "alltoallv");
    }
    return CheckMpi(MPI_Alltoallv(send, s.data(), sd.data(), ToMpi(type), recv,
                                  r.data(), rd.data(), ToMpi(type), comm_),
                    "alltoallv");
  }

  Status Reducescatter(const void* send, void* recv, int64_t recv_count,
                       DataType type, ReduceOp op) override {
    KOLO_ASSIGN_OR_RETURN(int n, ToInt(recv_count, "reducescatter"));
    const int64_t block_bytes = recv_count * DataTypeSize(type);
    if (recv == static_cast<const char*>(send) + world_.rank * block_bytes) {
      // MPI's in-place form reads the whole input from recvbuf; kolo's puts
      // the output inside the input, so run it out of place into a block.
      std::vector<char> block(block_bytes);
      KOLO_RETURN_IF_ERROR(
          CheckMpi(MPI_Reduce_scatter_block(send, block.data(), n, ToMpi(type),
                                            OpFor(type, op), comm_),
                   "reducescatter"));
      std::memcpy(recv, block.data(), block_bytes);
      return Status::Ok();
    }
    return CheckMpi(MPI_Reduce_scatter_block(send, recv, n, ToMpi(type),
                                             OpFor(type, op), comm_),
                    "reducescatter");
  }

  Status Barrier() override { return CheckMpi(MPI_Barrier(comm_), "barrier"); }

  // An MPI call costs microseconds in shared memory: fusing pays only for
  // small tensors.
  int64_t FusionCutoffBytes() const override { return int64_t{64} << 10; }

 private:
  MPI_Op OpFor(DataType type, ReduceOp op) const {
    if (type == DataType::kFloat16) return half_ops_[static_cast<int>(op)];
    if (type == DataType::kBFloat16) return bfloat_ops_[static_cast<int>(op)];
    return BuiltinOp(op);
  }

  const WorldInfo world_;
  MPI_Comm comm_;
  MPI_Op half_ops_[5];
  MPI_Op bfloat_ops_[5];
};

}  // namespace

namespace {

// Takes `comm` over when it matches the world the caller expects.
StatusOr<std::unique_ptr<Backend>> AdoptCommunicator(const WorldInfo& world,
                                                     MPI_Comm comm,
                                                     const char* what) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (rank != world.rank || size != world.size) {
    MPI_Comm_free(&comm);
    return InvalidArgument(
        std::string("the mpi backend sees rank ") + std::to_string(rank) +
        " of " + std::to_string(size) + " in " + what +
        " but kolo expected rank " + std::to_string(world.rank) + " of " +
        std::to_string(world.size) +
        ": start MPI jobs with mpirun or kolorun --backend mpi");
  }
  return std::unique_ptr<Backend>(new MpiBackend(world, comm));
}

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateMpiBackend(
    const BackendOptions& options) {
  KOLO_RETURN_IF_ERROR(StartMpi().status());
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return AdoptCommunicator(options.world, comm, "the job's world");
}

StatusOr<std::unique_ptr<Backend>> CreateMpiSubBackend(
    const BackendOptions& options, bool member) {
  KOLO_RETURN_IF_ERROR(StartMpi().status());
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm comm = MPI_COMM_NULL;
  if (MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, world_rank,
                     &comm) != MPI_SUCCESS) {
    return Internal("MPI_Comm_split failed while forming a sub-world of " +
                    std::to_string(options.world.size) + " ranks");
  }
  if (!member) return std::unique_ptr<Backend>();
  return AdoptCommunicator(options.world, comm, "a sub-world");
}

}  // namespace kolo
