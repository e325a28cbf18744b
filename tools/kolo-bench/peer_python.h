// The Python interpreter kolo-bench's PyTorch peers run in (bench/peers/:
// DDP, ZeroRedundancyOptimizer and FSDP2 in torch_ddp.py, pipelining in
// torch_pipeline.py, distributed checkpoints in torch_checkpoint.py), the
// torch it imports, and what that torch can do.
//
// Which interpreter, first found first: --python on the subcommand; the
// one the build was configured with (the CMake cache variable KOLO_PYTHON,
// which scripts/setup.sh sets to the project's .venv/bin/python, the torch
// kolo's own LibTorch comes from, so that both sides of a comparison run
// the same kernels); for a build configured without one, /usr/bin/python3
// (Debian's python3-torch) where it exists, else the python3 on PATH.
//
// Every table that has a peer row ends with TorchVersionsLine(), and every
// JSON row names the torch its side ran ("torch_version"): kolo's rows the
// LibTorch kolo was built with (kolo::BuildInfo()), the peers' what their
// `import torch` reported.
#ifndef KOLO_TOOLS_KOLO_BENCH_PEER_PYTHON_H_
#define KOLO_TOOLS_KOLO_BENCH_PEER_PYTHON_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "command.h"
#include "kolo/status.h"

namespace kolo::bench {

// --python, or the configured interpreter, as above.
std::string FindPython(const std::string& flag);

// --python on a subcommand that runs PyTorch peers.
void AddPythonFlag(CLI::App* cmd, std::string* python);

struct PeerPython {
  std::string path;
  // torch.__version__ ("2.11.0+cu130"); empty when `path` cannot import
  // torch.
  std::string torch_version;
  // CPU autocast to float16 and a CPU GradScaler work (torch 2.x; 1.13 turns
  // the autocast off with a warning, and would train in fp32 unnoticed).
  bool cpu_fp16 = false;

  // Why the peers cannot run, for a table's row: "not installed (...)",
  // naming the interpreter and how to get one; empty when they can.
  std::string Missing() const;
  // The same, or "script not found: <script>" when the peer's script is
  // not there; empty when the peer can run.
  std::string Missing(const std::string& script) const;
};

// Runs `python` once to read its torch's version and fp16 support.
PeerPython ProbePeerPython(const std::string& python);

// The PyTorch peer a command measures beside kolo: its interpreter, probed
// once, and why the peer cannot run here. Nothing is probed until the
// command asks for a peer, so a run of kolo alone never starts Python.
class TorchPeer {
 public:
  // Probes `python` on the first call, with `script` the peer's program;
  // later calls keep the first answer.
  const PeerPython& Probe(const std::string& python, const std::string& script);

  // The probed interpreter; null before Probe.
  const PeerPython* python() const { return python_ ? &*python_ : nullptr; }
  // Why the peer cannot run, for a table's row; empty when it can, or
  // when it was never probed.
  const std::string& missing() const { return missing_; }
  // Probed and able to run.
  bool runs() const { return python_.has_value() && missing_.empty(); }
  // The peer's torch.__version__; empty before Probe.
  std::string torch_version() const {
    return python_ ? python_->torch_version : "";
  }

 private:
  std::optional<PeerPython> python_;
  std::string missing_;
};

// What ProbePeerPython makes of the probe's output: the version on the
// first line, "cpu-fp16" or "no-cpu-fp16" on the second; `ran` false (it
// failed to start or to import torch) leaves the version empty.
PeerPython ParsePeerProbe(const std::string& python, bool ran,
                          const std::string& output);

// The LibTorch kolo (and kolo-train --no-kolo, the plain-LibTorch peer)
// was built with, "none" for a build without LibTorch.
std::string KoloTorchVersion();

// kInvalidArgument naming `who` (a variant or peer) and the peer's torch
// when --precision `precision` is fp16 and that torch cannot autocast to
// float16 on the CPU.
Status CheckPeerPrecision(const std::string& precision, const PeerPython& peer,
                          const std::string& who);

// The line under a table that names the torch each side ran:
//   # torch: kolo's side built with LibTorch 2.11.0; the PyTorch peers ran
//   torch 2.11.0+cu130 (/work/main/.venv/bin/python)
// `peer` null: no peer ran.
std::string TorchVersionsLine(const PeerPython* peer);

// A record's "environment" (environment.h): the machine, kolo's LibTorch
// and, where `peer` is given, the peers' interpreter and its torch.
nlohmann::json RunEnvironment(const PeerPython* peer);

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_KOLO_BENCH_PEER_PYTHON_H_
