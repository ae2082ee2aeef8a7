import os
import platform
import subprocess
import sys

import pytest

from tapestry.core import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_malloc_is_tuned_on_import_and_can_be_disabled():
    assert allocator.tune_malloc() is True  # idempotent
    code = "import tapestry.core.allocator as a, tapestry; print(a._applied)"
    # (PYTHONPATH kept: where tapestry runs from its source tree, not installed)
    base = {"PATH": "", **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**base, "TAPESTRY_TUNE_MALLOC": "0"}, check=True)
    assert off.stdout.strip() == "False"
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=base, check=True)
    assert on.stdout.strip() == "True"
