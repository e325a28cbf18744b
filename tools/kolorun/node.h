// Per-node mode, torchrun's model: the cluster's own launcher (a batch
// system, a container orchestrator, a shell loop over ssh) starts one
// kolorun on every node,
//
//   kolorun --nnodes M --node-rank I --rendezvous HOST:PORT
//           --np-per-node K program args...
//
// and each starts the K ranks of its node: ranks I*K to I*K+K-1 of M*K. The
// kolorun of node 0 hosts the store at HOST:PORT (so HOST must be an
// address of node 0); the others' ranks connect to it. Since no one
// kolorun starts the whole job, the job's secret cannot be made up by one
// of them: every node reads the same one from --secret-file or
// $KOLO_JOB_SECRET.
//
// Each node's ranks know their node by KOLO_HOST_ID ("node1", unless the
// user set KOLO_HOST_ID), and listen for Gloo on the address of the
// interface through which this node reaches HOST (or the first address
// matching --network-interface). A rank that fails stops its node's ranks;
// the other nodes' ranks learn of it through the store and the engine and
// stop with an error naming it, which ends their nodes' kolorun too.
#ifndef KOLO_TOOLS_KOLORUN_NODE_H_
#define KOLO_TOOLS_KOLORUN_NODE_H_

#include <optional>
#include <string>

#include "options.h"
#include "process.h"

namespace kolo {
namespace kolorun {

// Runs this node's ranks; returns kolorun's exit status.
int RunNode(const LaunchOptions& options, SignalWatcher* signals);

// The job secret of per-node mode: the first line of `secret_file` when it
// is not empty, else `from_env` ($KOLO_JOB_SECRET). Errors name the file or
// the variable when the secret is shorter than kMinJobSecretBytes (and say
// how to make one), or say that neither was given.
StatusOr<std::string> ReadJobSecret(const std::string& secret_file,
                                    const std::optional<std::string>& from_env);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_NODE_H_
