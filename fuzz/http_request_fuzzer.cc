// Fuzzes the metrics HTTP server's reading of a request's head and its
// request line (metrics/http_server.cc): kolorun serves the job's metrics
// on a port anyone on the network can reach. The input is sent as the
// request; the server must answer or close, and hand its handler only the
// path of a GET or HEAD, without the query string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/loopback.h"
#include "metrics/http_server.h"

namespace {

kolo::metrics::HttpServer& Server() {
  return kolo::fuzz::StartedOnce<kolo::metrics::HttpServer>([] {
    return kolo::metrics::HttpServer::Start(
        "127.0.0.1", 0, [](const std::string& path) {
          if (path.find('?') != std::string::npos) std::abort();
          return kolo::metrics::HttpResponse{200, "text/plain", path};
        });
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::LoopbackClient client(Server().port());
  client.Send(data, size);
  client.FinishAndDrain();
  return 0;
}
