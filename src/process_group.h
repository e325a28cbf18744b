// The state behind a kolo::ProcessGroup (kolo/point_to_point.h): its ranks
// and the engine its collectives run on. The process (process.h) keeps a
// weak reference to every group so that Shutdown can close them: a group's
// engine holds sockets and shared memory that must not outlive the
// membership they were made in.
#ifndef KOLO_PROCESS_GROUP_H_
#define KOLO_PROCESS_GROUP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/backend.h"
#include "common/mutex.h"
#include "kolo/point_to_point.h"

namespace kolo {
namespace internal {

struct GroupState {
  std::vector<int32_t> ranks;  // world ranks, ascending
  int32_t rank = 0;            // this process's place among them
  int64_t id = 0;              // the NewGroup call that made it

  Mutex mutex;
  // Null for a group of one rank, and after Close.
  std::unique_ptr<Backend> backend KOLO_GUARDED_BY(mutex);
  bool open KOLO_GUARDED_BY(mutex) = true;

  void Close() KOLO_EXCLUDES(mutex) {
    MutexLock lock(&mutex);
    open = false;
    backend.reset();
  }
};

}  // namespace internal
}  // namespace kolo

#endif  // KOLO_PROCESS_GROUP_H_
