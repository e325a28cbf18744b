// How kolorun reaches another host: the command that starts its agent
// there (agent.h).
//
// By default that is ssh, non-interactive so that it can never stop at a
// password or host-key prompt (BatchMode=yes), with a connect timeout, and
// accepting a host key only the first time it is seen. Clusters that start
// processes their own way (`srun -w {host}`, `docker exec {host}`, the
// tests' `ip netns exec {host}`) give --remote-shell a template instead.
//
// Nothing secret goes on the command line: the agent's command is kolorun's
// own path and `--agent`, and the job's secret and settings follow on the
// agent's stdin, which every one of these shells forwards.
#ifndef KOLO_TOOLS_KOLORUN_REMOTE_H_
#define KOLO_TOOLS_KOLORUN_REMOTE_H_

#include <string>
#include <vector>

#include "kolo/status.h"
#include "options.h"

namespace kolo {
namespace kolorun {

// The argv that runs `agent` (an argv) on `host`: `agent` itself when
// `host` is this machine (IsLocalHost), else the --remote-shell template
// with {host} replaced (and {command} by `agent` as one shell string, or
// `agent` appended when the template has no {command}), else ssh with
// --ssh-port, --ssh-identity-file and --ssh-config-file.
std::vector<std::string> RemoteCommand(const LaunchOptions& options,
                                       const std::string& host,
                                       const std::vector<std::string>& agent);

// The path of the running kolorun, which agents are started from on every
// host (like mpirun, kolorun expects the same installation everywhere).
StatusOr<std::string> SelfPath();

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_REMOTE_H_
