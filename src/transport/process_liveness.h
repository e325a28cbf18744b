// Whether another rank's process on this host still lives: what the shm
// transports (ShmGroup, the shm PeerLink) check between the slices of a
// wait, so that a rank that died is named instead of waited for until the
// timeout.
#ifndef KOLO_TRANSPORT_PROCESS_LIVENESS_H_
#define KOLO_TRANSPORT_PROCESS_LIVENESS_H_

#include <cstdint>

namespace kolo {

// The inode of this process's pid namespace (0 when unknown): two ranks can
// check each other's pids only when theirs agree.
uint64_t PidNamespace();

// Whether `pid` is a live process: not gone and not a zombie (a killed
// rank stays a zombie until its launcher reaps it). Reads /proc.
bool ProcessAlive(int32_t pid);

}  // namespace kolo

#endif  // KOLO_TRANSPORT_PROCESS_LIVENESS_H_
