// The agent: `kolorun --agent`, one per host of a multi-host job, started by
// the launching kolorun (the driver) through ssh or --remote-shell.
//
// Protocol. The driver and its agents talk in JSON objects, one per line,
// over the agent's stdin (driver to agent) and stdout (agent to driver);
// agent_messages.h holds one struct per message and their one serializer
// and parser. Each message has a "type"; the agent answers the first two in
// kind:
//
//   1. preflight  {program, cwd, network_interface}
//        The agent moves to `cwd`, finds `program` there, lists its own
//        addresses that the job may use, and opens a listener on each, so
//        that the others can prove they reach it. It answers {hostname,
//        program (its path here), addresses: [{interface, address, prefix,
//        port}], error} where `error`, if any, says why this host cannot
//        run the job.
//   2. probe      {targets: [{host, address, port}], timeout_ms}
//        The agent connects to every target at once and answers {results:
//        [{host, address, error}]}, an empty error meaning reached.
//   3. launch     {host, ranks: {first_rank, local_size, size, cross_rank,
//                  cross_size}, command, settings: [[name, value]...],
//                  bind_to, verbose, [tag, name]}
//        The agent starts its ranks and supervises them like a one-host
//        kolorun; from then on its stdout and stderr carry their tagged
//        lines and its own messages ("rank 5 on h2 was killed by signal
//        9"), and its exit status is the job's on this host. With `tag`
//        (kolorun --elastic: one agent per worker) its one rank's lines are
//        tagged "[tag]" and its messages call it `name`.
//
// The job's secret travels in `settings`, on stdin, never on a command
// line. The driver keeps the agent's stdin open for the whole job: its end
// (the driver died, ssh's connection dropped) makes the agent stop its
// ranks. The end of stdin before `launch`, or a message it does not
// expect, ends the agent with nothing started.
#ifndef KOLO_TOOLS_KOLORUN_AGENT_H_
#define KOLO_TOOLS_KOLORUN_AGENT_H_

#include "process.h"

namespace kolo {
namespace kolorun {

// Serves the driver on stdin/stdout until the job on this host ends;
// returns the agent's exit status.
int RunAgent(SignalWatcher* signals);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_AGENT_H_
