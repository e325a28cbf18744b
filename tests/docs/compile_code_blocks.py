#!/usr/bin/env python3
"""Compiles every C++ example of kolo's documentation, so none can go stale.

The examples are:
  * every ```cpp block of README.md and of every page under docs/
    (docs/**/*.md);
  * in each public header (include/kolo/*.h), the lines of its opening
    comment (before the include guard) indented by at least three spaces
    after the "//": the usage sketch that opens the file.

A block with a main() is a whole program. Any other block is a fragment and
compiles inside a function returning kolo::Status, after the declarations in
CONTEXT: the few names the sketches leave to the reader (a buffer `grad` of
`n` floats, a batch of `images` and `labels`, a user's `Net`...). The
fragment runs in a nested scope, so it may declare those names again.

Blocks that use LibTorch compile only when --torch-flags is given; without
it they are listed as skipped. Every block is checked with -fsyntax-only
(names and types, no code generation). The fragments of each kind compile
together, each in a function of its own under a #line naming its source,
so LibTorch's headers are parsed once; when that fails, each fragment
compiles alone to name the ones at fault. Exit 1 if any block fails.
"""
import argparse
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

INCLUDES = """#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kolo/build_info.h"
#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "kolo/metrics.h"
#include "kolo/point_to_point.h"
#include "kolo/runtime.h"
"""

TORCH_INCLUDES = """#include <torch/torch.h>

#include "kolo/data.h"
#include "kolo/models.h"
#include "kolo/torch.h"
#include "kolo/torch_elastic.h"
#include "kolo/torch_parameter_server.h"
#include "kolo/torch_pipeline.h"
#include "kolo/torch_zero.h"
#include "kolo/trainer.h"
#include "kolo/trainer_model_parallel.h"

// A user's model.
struct Net : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x; }
};
"""

CONTEXT = """  int64_t n = 1024;
  std::vector<float> buffer(n, 1.0f);
  float* grad = buffer.data();
  auto OtherWork = [] {};
  (void)grad;
"""

TORCH_CONTEXT = """  torch::Tensor images = torch::zeros({8, 3, 32, 32});
  torch::Tensor labels = torch::zeros({8}, torch::kLong);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> my_shard;
  struct Batch { torch::Tensor data, target; };
  std::vector<Batch> shard;
  auto loss_fn = [](const torch::Tensor& out, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(out, target);
  };
  auto Step = [](const torch::Tensor&, const torch::Tensor&) {};
  int64_t epochs = 1;
  int32_t rank = 0, size = 1;
  namespace data = kolo::data;
  (void)images, (void)labels, (void)epochs, (void)rank, (void)size;
"""


def markdown_blocks(path, source):
    """Every ```cpp block of the page at `path`, named by its path under `source`."""
    text = path.read_text()
    name = path.relative_to(source).as_posix()
    for match in re.finditer(r"^```cpp\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, match.start()) + 1
        yield f"{name}:{line}", match.group(1)


def markdown_pages(source):
    """README.md, then every page under docs/, in a stable order."""
    return [source / "README.md"] + sorted((source / "docs").rglob("*.md"))


def header_blocks(path):
    lines = path.read_text().split("\n")
    block, start = [], None
    for number, line in enumerate(lines, 1):
        if not line.startswith("//"):
            break  # the opening comment ends at the first non-comment line
        if re.match(r"^//   ", line):
            if start is None:
                start = number
            block.append(line[2:])
        elif block:
            yield f"include/kolo/{path.name}:{start}", "\n".join(block) + "\n"
            block, start = [], None
    if block:
        yield f"include/kolo/{path.name}:{start}", "\n".join(block) + "\n"


def uses_torch(code):
    return "torch" in code or "kolo::models" in code or "data::" in code


def program(code, torch):
    head = INCLUDES + (TORCH_INCLUDES if torch else "")
    if re.search(r"\bint main\(", code):
        return head + "\n" + code
    context = CONTEXT + (TORCH_CONTEXT if torch else "")
    return (head + "\nkolo::Status Example() {\n" + context + "  {\n" + code +
            "\n  }\n  return kolo::Status::Ok();\n}\n")


def unit(fragments, torch):
    """Every fragment of `fragments` in one source, each in its own function."""
    head = INCLUDES + (TORCH_INCLUDES if torch else "")
    context = CONTEXT + (TORCH_CONTEXT if torch else "")
    parts = [head]
    for number, (where, code) in enumerate(fragments):
        name, line = where.rsplit(":", 1)
        # A Markdown block's code starts on the line after its ```cpp fence; a
        # header's on the block's first line.
        first = int(line) + 1 if name.endswith(".md") else int(line)
        parts.append(f"\nkolo::Status Example{number}() {{\n{context}  {{\n"
                     f'#line {first} "{name}"\n{code}\n  }}\n'
                     "  return kolo::Status::Ok();\n}\n")
    return "".join(parts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--compiler", required=True)
    parser.add_argument("--flags", default="", help="compiler flags, space-separated")
    parser.add_argument("--torch-flags", default="",
                        help="LibTorch's flags, space-separated; empty: skip torch blocks")
    args = parser.parse_args()
    source = pathlib.Path(args.source_dir)
    blocks = []
    for page in markdown_pages(source):
        blocks.extend(markdown_blocks(page, source))
    for header in sorted((source / "include" / "kolo").glob("*.h")):
        blocks.extend(header_blocks(header))
    flags = shlex.split(args.flags)
    torch_flags = shlex.split(args.torch_flags)
    failed, skipped = [], []
    # Fragments share one translation unit per kind (with and without
    # LibTorch), each in a function of its own and under a #line that points
    # at its source, so LibTorch's headers are parsed once rather than once
    # per block; programs (with main) compile alone. A failing unit is
    # compiled again block by block to name the blocks that fail.
    fragments = {False: [], True: []}
    programs = []
    for where, code in blocks:
        torch = uses_torch(code)
        if torch and not torch_flags:
            skipped.append(where)
        elif re.search(r"\bint main\(", code):
            programs.append((where, code, torch))
        else:
            fragments[torch].append((where, code))

    with tempfile.TemporaryDirectory() as scratch:
        def compile_source(text, torch):
            path = pathlib.Path(scratch) / "block.cc"
            path.write_text(text)
            command = [args.compiler, "-std=c++17", "-fsyntax-only", "-w",
                       f"-I{source / 'include'}"] + flags + (torch_flags if torch else []) + [str(path)]
            return subprocess.run(command, capture_output=True, text=True)

        def compile_alone(where, code, torch):
            result = compile_source(program(code, torch), torch)
            if result.returncode != 0:
                failed.append(where)
                print(f"FAILED {where}:\n{code}\n{result.stderr[-3000:]}", file=sys.stderr)
            else:
                print(f"ok {where}")

        for torch, group in fragments.items():
            if not group:
                continue
            result = compile_source(unit(group, torch), torch)
            if result.returncode == 0:
                for where, _ in group:
                    print(f"ok {where}")
            else:
                for where, code in group:
                    compile_alone(where, code, torch)
        for where, code, torch in programs:
            compile_alone(where, code, torch)
    compiled = sum(len(group) for group in fragments.values()) + len(programs)
    for where in skipped:
        print(f"skipped {where}: uses LibTorch, and kolo was built without it")
    print(f"{compiled} blocks compiled, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed or compiled == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
