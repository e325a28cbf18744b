#include "collectives/backend.h"

#include "common/reduce.h"

namespace kolo {

Status Backend::AllreduceAndDivide(const void* send, void* recv, int64_t count,
                                   DataType type, int64_t divisor) {
  Status status = Allreduce(send, recv, count, type, ReduceOp::kSum);
  if (!status.ok()) return status;
  DivideInPlace(type, recv, count, divisor);
  return Status::Ok();
}

}  // namespace kolo
