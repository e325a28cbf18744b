// kolo's internal interface for its own tools: the rendezvous store.
// kolorun hosts a TcpStoreServer for the ranks it launches, and kolo-bench
// connects a TcpStoreClient to build a backend without the runtime.
// See kolo_internal/config.h for what this header set is.
#ifndef KOLO_INTERNAL_STORE_H_
#define KOLO_INTERNAL_STORE_H_

#include "store/store.h"
#include "store/tcp_store.h"

#endif  // KOLO_INTERNAL_STORE_H_
