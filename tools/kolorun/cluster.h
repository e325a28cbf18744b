// The driver of a multi-host job: kolorun with -H or --hostfile.
//
// It starts one agent per host (agent.h), all at once, and runs the
// preflight under one deadline (--start-timeout): every host must answer,
// find the program in the same working directory, and reach every other
// host, and this kolorun must reach them all, on an address the job may use
// (--network-interface, or any up and not loopback). A host whose agent
// cannot be started, or that fails a check, is listed with the reason (ssh's
// own words, "program 'x' not found", "no route to 10.1.0.3:41234 from
// 10.1.0.2 (route via eth1)") and nothing is started anywhere.
//
// Choosing the addresses. For each host, its first candidate address that
// every other host and the driver reached is the host's address: Gloo's
// pairs listen there (KOLO_GLOO_HOSTNAME) and the others connect to it. An
// address that more than one host has (docker0's 172.17.0.1, a bridge every
// machine sets up alike) is never chosen, since a probe to it may reach the
// prober's own interface. The store listens on the driver's address on the
// route to the first host. The choice is printed once.
//
// Then each agent is told its ranks and the job's settings, and from there
// the driver supervises the agents as a one-host kolorun supervises ranks
// (launcher.h): it relays their lines, and when one host's job fails the
// others are stopped. Every rank knows its host by the name in the host
// list (KOLO_HOST_ID), so that ranks on one host share memory, and with
// more than one rank on some host the allreduce is hierarchical.
#ifndef KOLO_TOOLS_KOLORUN_CLUSTER_H_
#define KOLO_TOOLS_KOLORUN_CLUSTER_H_

#include <optional>
#include <string>

#include "options.h"
#include "process.h"

namespace kolo {
namespace kolorun {

// Runs the job on options.hosts; returns kolorun's exit status.
int RunCluster(const LaunchOptions& options, SignalWatcher* signals);

// The address a store for a job on options.hosts listens on, found as
// RunCluster finds its own (an agent on every host, the preflight and the
// probes under --start-timeout, then this machine's address on its route
// to the first host's), so that a host's name need resolve only where its
// remote shell takes it. For kolorun --elastic, whose workers then start
// one at a time, each through an agent of its own; the agents started here
// are stopped before it returns. Nullopt when the preflight failed (its
// problems said, *exit_code 1) or kolorun was signalled (130).
std::optional<std::string> FindStoreAddress(const LaunchOptions& options,
                                            SignalWatcher* signals,
                                            int* exit_code);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_CLUSTER_H_
