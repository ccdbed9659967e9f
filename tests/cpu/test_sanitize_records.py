"""scripts/sanitize/render_race_records.sh: the racecheck suppression records it writes name the paged decode
kernel's current source lines (its def and its gl.warp_specialize call), and it refuses a source where either is
missing rather than write a record that matches nothing."""

import os
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "sanitize", "render_race_records.sh")
KERNEL = os.path.join(ROOT, "kernels", "paged", "paged_decode_gluon.py")
FUNC = "paged_decode_gluon_kernel"


def render(out_dir, source=None):
    args = ["bash", SCRIPT, out_dir] + ([source] if source else [])
    return subprocess.run(args, capture_output=True, text=True)


class RenderedRecords(unittest.TestCase):
    def test_paged_records_name_the_kernels_def_and_warp_specialize_lines(self):
        with tempfile.TemporaryDirectory() as d:
            r = render(d)
            self.assertEqual(r.returncode, 0, r.stderr)
            path = r.stdout.strip()
            # Every placeholder filled in (the records follow the last comment).
            with open(path) as f:
                self.assertNotIn("@PAGED_DECODE", f.read().split("-->")[-1])
            with open(KERNEL) as f:
                lines = f.read().splitlines()
            records = [rec for rec in ET.parse(path).getroot().iter("record")
                       if rec.find("what/source/where/func").text == FUNC]
            self.assertGreaterEqual(len(records), 3)
            forms = set()
            for rec in records:
                src = int(rec.find("what/source/where/line").text)
                self.assertTrue(lines[src - 1].startswith(f"def {FUNC}("), lines[src - 1])
                dests = tuple(int(x.find("where/line").text) for x in rec.findall("what/destination"))
                for n in dests:
                    self.assertTrue(n == src or lines[n - 1].strip().startswith("gl.warp_specialize("),
                                    lines[n - 1])
                forms.add(tuple("def" if n == src else "call" for n in dests))
            # One record for each form of the report: both writes, the def's alone, the call's alone.
            self.assertEqual(forms, {("def", "call"), ("def",), ("call",)})

    def test_refuses_a_source_without_the_kernel(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "renamed.py")
            with open(KERNEL) as k, open(src, "w") as f:
                f.write(k.read().replace(f"def {FUNC}(", "def renamed_kernel("))
            r = render(os.path.join(d, "out"), src)
            self.assertEqual(r.returncode, 1)
            self.assertIn(src, r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "out", "racecheck_warp_specialize_state.xml")))

    def test_refuses_a_kernel_whose_body_has_no_warp_specialize(self):
        # Calls before the def, in a comment of the body and in the next function do not count.
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "no_ws.py")
            with open(src, "w") as f:
                f.write("def before():\n    gl.warp_specialize([])\n\n\n"
                        f"def {FUNC}(\n    x):\n    # see gl.warp_specialize( in the library\n    return x\n\n\n"
                        "@gluon.jit\ndef after():\n    gl.warp_specialize([])\n")
            r = render(os.path.join(d, "out"), src)
            self.assertEqual(r.returncode, 1)
            self.assertIn("gl.warp_specialize", r.stderr)

    def test_refuses_a_missing_source(self):
        with tempfile.TemporaryDirectory() as d:
            missing = os.path.join(d, "missing.py")
            r = render(os.path.join(d, "out"), missing)
            self.assertEqual(r.returncode, 1)
            self.assertIn(missing, r.stderr)


if __name__ == "__main__":
    unittest.main()
