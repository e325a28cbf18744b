// A minimal HTTP/1.1 server for the metrics endpoint: GET and HEAD, one
// request per connection, answered in turn on one thread.
//
// Prometheus scrapes a target every few seconds and the job page polls once
// a second, so one thread that answers each request at once is enough; a
// client that sends nothing is dropped after a second, so it cannot hold
// the others up for long. Between requests the thread runs `tick` (at
// least every `tick_period`), which the exporter uses to sample its
// history.
//
// Thread-safety: Start() and Stop() from one thread; the handler and the
// tick run on the server's thread.
#ifndef KOLO_METRICS_HTTP_SERVER_H_
#define KOLO_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "kolo/status.h"
#include "net/socket.h"

namespace kolo {
namespace metrics {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// `path` without its query string.
using HttpHandler = std::function<HttpResponse(const std::string& path)>;

class HttpServer {
 public:
  ~HttpServer();
  // Listens on address:port (port 0: the OS chooses); kInternal naming the
  // address when it cannot.
  static StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& address, int port, HttpHandler handler,
      std::function<void()> tick = nullptr,
      std::chrono::milliseconds tick_period = std::chrono::milliseconds(250));
  int port() const { return port_; }
  void Stop();

 private:
  HttpServer(Socket listener, HttpHandler handler, std::function<void()> tick,
             std::chrono::milliseconds tick_period);
  void Serve();
  void Answer(Socket connection);

  Socket listener_;
  const HttpHandler handler_;
  const std::function<void()> tick_;
  const std::chrono::milliseconds tick_period_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// The status line's text for the codes the server uses.
const char* HttpReason(int status);

}  // namespace metrics
}  // namespace kolo

#endif  // KOLO_METRICS_HTTP_SERVER_H_
