// kolorun --elastic: the driver of an elastic job (kolo/elastic.h is the
// workers' side, src/elastic/protocol.h the keys between them).
//
//   kolorun --elastic -np N [--min-np A] [--max-np B]
//           [-H h1:4 | --hostfile F | --host-discovery-script S]
//           [--reset-limit R] [--elastic-timeout S] [--heartbeat-timeout S]
//           [--blacklist-cooldown S] program args...
//
// The policy, which a user can rely on:
//  - The driver hosts the store, so losing any worker, rank 0 included,
//    loses no rendezvous. It starts N workers, then keeps as many as the
//    hosts' free slots allow, up to --max-np (default N): a worker that
//    dies is replaced, and a host that the discovery script adds gets
//    workers, unless its host is blacklisted.
//  - Rounds: once the first N workers are ready, round 0 lists them; every
//    change of the ready workers (a death, an eviction, a new worker, a
//    host removed) publishes the next round at once. Survivors keep their
//    order, so rank 0 stays rank 0 while it lives, and new workers come last.
//  - A worker's exit that is not a success and not its removal is a
//    failure: kolorun names it ("worker 3 (rank 1 of round 0 on localhost)
//    was killed by signal 9 (Killed)"), writes it into its round's failure
//    news, so that the survivors' errors name it, and counts it against its
//    host. A host with kBlacklistFailures failures gets no new workers for
//    --blacklist-cooldown seconds (its running workers go on); then its
//    count starts again.
//  - A worker that fails before the first round formed fails the job: a
//    program that cannot start (a bad flag, missing data) would only fail
//    again.
//  - A worker whose heartbeat stops for --heartbeat-timeout seconds (it is
//    frozen: SIGSTOP, a debugger, a machine that hangs) is evicted: named,
//    written into the failure news and killed, so that its peers' waits end
//    at once instead of at their timeout.
//  - Each round after the first is a reset; more than --reset-limit resets
//    end the job. Fewer ready workers than --min-np: kolorun waits up to
//    --elastic-timeout seconds for more, then ends the job saying so.
//  - The job succeeds when a member of the current round exits 0: kolorun
//    then starts nothing more, waits for the others, stops the workers that
//    were waiting to join, and exits 0. SIGINT/SIGTERM stop every worker
//    as in a plain job (exit 130/143).
//
// Every line a worker prints is relayed with the tag "[w<id>]", since its
// rank changes from round to round, by the ChildWatcher a plain job's
// Launcher uses too (child_watcher.h): when kolorun's stdout is a terminal,
// worker 0's is one as well, and the line it redraws stays in place below
// kolorun's messages, as rank 0's does in a plain job.
//
// Thread-safety: Run() from the thread that created the SignalWatcher.
#ifndef KOLO_TOOLS_KOLORUN_ELASTIC_H_
#define KOLO_TOOLS_KOLORUN_ELASTIC_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "hosts.h"
#include "kolo/status.h"
#include "options.h"
#include "process.h"

namespace kolo {
namespace kolorun {

// Failures on one host that blacklist it for --blacklist-cooldown.
inline constexpr int32_t kBlacklistFailures = 2;

// The hosts a discovery script printed: lines "host:slots" or "host
// slots=N" (a hostfile), blank output meaning no hosts. `script` names the
// source in errors.
StatusOr<std::vector<HostSlots>> ParseDiscoveredHosts(
    const std::string& output, const std::string& script);

// Runs `script` (through /bin/sh -c) and returns what it printed; an error
// names the script and its exit status, or the timeout it overran (it is
// then killed).
StatusOr<std::string> RunDiscoveryScript(const std::string& script,
                                         std::chrono::milliseconds timeout);

// The members of the next round: the workers of `previous` (in its order)
// that are still `ready`, then the other ready workers in id order, at most
// `max_workers` of them.
std::vector<int64_t> NextRoundMembers(const std::vector<int64_t>& previous,
                                      const std::vector<int64_t>& ready,
                                      int32_t max_workers);

// Runs an elastic job to its end; returns kolorun's exit status.
int RunElastic(const LaunchOptions& options, const std::string& program_path,
               SignalWatcher* signals);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_ELASTIC_H_
