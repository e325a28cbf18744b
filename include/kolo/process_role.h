// What kolorun told this process it is: a worker, or a parameter server of
// `kolorun -np N --servers K` (kolo/torch_parameter_server.h).
//
// kolorun --servers K starts N + K processes of the same program; the last K
// world ranks are servers. Each process gets KOLO_ROLE=worker|server and
// KOLO_SERVERS=K. Without them (no --servers, another launcher) a process is
// a worker and the job has no servers, unless the program picks servers
// itself (ParameterServerOptions::servers).
//
// Thread-safety: pure reads of the environment.
#ifndef KOLO_PROCESS_ROLE_H_
#define KOLO_PROCESS_ROLE_H_

#include <cstdint>

#include "kolo/status.h"

namespace kolo {

enum class ProcessRole { kWorker, kServer };

struct RoleInfo {
  ProcessRole role = ProcessRole::kWorker;  // KOLO_ROLE
  int32_t server_count = 0;                 // KOLO_SERVERS
};

// Reads KOLO_ROLE and KOLO_SERVERS. kInvalidArgument names the variable and
// its value when either is malformed (a role other than worker or server, a
// negative count, a server role with a count of 0).
StatusOr<RoleInfo> Role();

}  // namespace kolo

#endif  // KOLO_PROCESS_ROLE_H_
