// kolo's internal interface for its own tools: choosing the network
// interface, and sockets with deadlines. kolorun checks
// --network-interface on every host before it launches ranks, and
// kolo-bench reports which interface a run used and scrapes a job's
// metrics.
// See kolo_internal/config.h for what this header set is.
#ifndef KOLO_INTERNAL_NET_H_
#define KOLO_INTERNAL_NET_H_

#include "net/interfaces.h"
#include "net/socket.h"

#endif  // KOLO_INTERNAL_NET_H_
