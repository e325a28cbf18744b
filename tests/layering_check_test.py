#!/usr/bin/env python3
"""Feeds layering_check.py small synthetic trees, one kind of violation
each, and checks that it names every one and passes a clean tree."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layering_check  # noqa: E402  (found beside this file)


class LayeringCheckTest(unittest.TestCase):

    def Tree(self, files):
        """A source tree holding `files` ({path: text}) and every folder
        of the layers, so that only the files given can break it."""
        root = tempfile.mkdtemp(prefix="kolo-layering-")
        self.addCleanup(subprocess.run, ["rm", "-rf", root], check=False)
        for folder in layering_check.LAYERS:
            if folder:
                os.makedirs(os.path.join(root, "src", folder), exist_ok=True)
        os.makedirs(os.path.join(root, "tools"), exist_ok=True)
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        return root

    def Violations(self, files):
        return layering_check.Check(self.Tree(files))

    def AssertOneViolation(self, files, *fragments):
        violations = self.Violations(files)
        self.assertEqual(len(violations), 1, violations)
        for fragment in fragments:
            self.assertIn(fragment, violations[0])

    def testACleanTreePasses(self):
        self.assertEqual(self.Violations({
            "src/common/status.h": "#include <vector>\n",
            "src/store/store.h": '#include "common/status.h"\n',
            "src/store/store.cc":
                '#include "store/store.h"\n#include "kolo/kolo.h"\n',
            "src/torch/module.cc":
                "#include <torch/torch.h>\n#include <store/store.h>\n",
            "src/api.cc": '#include "process.h"\n',
            "src/process.h": '#include "elastic/worker.h"\n',
            "src/elastic/worker.h": '#include "runtime/runtime.h"\n',
            "src/runtime/runtime.h": "",
            "tools/kolorun/main.cc":
                '#include "kolo/kolo.h"\n#include <kolo_internal/net.h>\n'
                '#include "kolorun/options.h"\n#include <torch/torch.h>\n',
            "src/internal/kolo_internal/net.h": '#include "net/socket.h"\n',
            "src/net/socket.h": "",
        }), [])

    def testAQuotedIncludeOfAHigherLayer(self):
        self.AssertOneViolation(
            {"src/common/config.cc": '#include "store/store.h"\n',
             "src/store/store.h": ""},
            "src/common/config.cc:1", "common must not depend on store")

    def testAnAngleBracketIncludeOfAHigherLayer(self):
        self.AssertOneViolation(
            {"src/net/socket.cc": "#include <transport/tcp_mesh.h>\n",
             "src/transport/tcp_mesh.h": ""},
            "net must not depend on transport")

    def testAnIndentedInclude(self):
        self.AssertOneViolation(
            {"src/transport/tcp.cc":
                 '#ifdef X\n#  include "runtime/runtime.h"\n#endif\n',
             "src/runtime/runtime.h": ""},
            "src/transport/tcp.cc:2", "transport must not depend on runtime")
        self.AssertOneViolation(
            {"src/transport/tcp.cc": '  # include "runtime/runtime.h"\n',
             "src/runtime/runtime.h": ""},
            "transport must not depend on runtime")

    def testElasticSitsAboveRuntimeAndBelowTheRoot(self):
        self.AssertOneViolation(
            {"src/runtime/runtime.cc": '#include "elastic/worker.h"\n',
             "src/elastic/worker.h": ""},
            "runtime must not depend on elastic")
        self.AssertOneViolation(
            {"src/elastic/worker.cc": '#include "process.h"\n',
             "src/process.h": ""},
            "elastic must not depend on src/'s root")

    def testTheRootMustNotIncludeTorch(self):
        self.AssertOneViolation(
            {"src/api.cc": '#include "torch/module.h"\n',
             "src/torch/module.h": ""},
            "src/'s root must not depend on torch")

    def testAFolderWithNoPlaceFails(self):
        self.AssertOneViolation(
            {"src/newthing/thing.cc": '#include "common/status.h"\n',
             "src/common/status.h": ""},
            "src/newthing/", "no place in the layers")

    def testACycleOfUnitsInOneLayer(self):
        self.AssertOneViolation(
            {"src/common/config.h": "",
             "src/common/config.cc":
                 '#include "common/config.h"\n#include "common/reduce.h"\n',
             "src/common/reduce.h": "",
             "src/common/reduce.cc":
                 '#include "common/reduce.h"\n#include "common/config.h"\n'},
            "units include each other",
            "src/common/config <-> src/common/reduce")

    def testALongerCycleIsNamedWhole(self):
        self.AssertOneViolation(
            {"src/store/a.h": '#include "store/b.h"\n',
             "src/store/b.h": '#include "store/c.h"\n',
             "src/store/c.cc": '#include "store/a.h"\n'},
            "src/store/a <-> src/store/b <-> src/store/c")

    def testAToolIncludingSrcInEveryForm(self):
        violations = self.Violations({
            "src/common/config.h": "",
            "tools/kolorun/a.cc": '#include "common/config.h"\n',
            "tools/kolorun/b.cc": "#include <common/config.h>\n",
            "tools/kolorun/c.cc": '#   include "common/config.h"\n',
        })
        self.assertEqual(len(violations), 3, violations)
        for violation in violations:
            self.assertIn("tools see src/ only through kolo_internal/",
                          violation)

    def testTheScriptExitsNonZeroAndSaysWhy(self):
        root = self.Tree({"src/common/a.cc": '#include "torch/b.h"\n',
                          "src/torch/b.h": ""})
        run = subprocess.run(
            [sys.executable, layering_check.__file__, root],
            capture_output=True, text=True, check=False)
        self.assertEqual(run.returncode, 1)
        self.assertIn("common must not depend on torch", run.stderr)


if __name__ == "__main__":
    unittest.main()
