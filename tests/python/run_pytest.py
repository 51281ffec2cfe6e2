"""Runs the DLPack interop tests for CTest: exit 77 (skip) when pytest, both frameworks or a CUDA
device are missing, or when every test skipped; otherwise pytest's own exit status."""

import importlib.util
import os
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if importlib.util.find_spec("pytest") is None:
        print("SKIP: pytest is not installed")
        return SKIP
    if all(importlib.util.find_spec(m) is None for m in ("torch", "cupy")):
        print("SKIP: neither torch nor cupy is installed")
        return SKIP
    import pytest

    class Outcomes:
        def __init__(self):
            self.ran = 0
            self.skipped = 0

        def pytest_runtest_logreport(self, report):
            if report.skipped:
                self.skipped += 1
            elif report.when == "call":
                self.ran += 1

    outcomes = Outcomes()
    status = pytest.main(["-v", "-rs", "-p", "no:cacheprovider",
                          os.path.join(HERE, "test_dlpack_roundtrip.py")] + sys.argv[1:],
                         plugins=[outcomes])
    if status == 0 and outcomes.ran == 0:
        print("SKIP: every test skipped (see the reasons above)")
        return SKIP
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
