"""Naive gate, SWE-bench style: copy the judged tree, lay the pinned tests over it, run pytest
there, accept on its exit status."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
with tempfile.TemporaryDirectory() as tmp:
    work = os.path.join(tmp, "repo")
    shutil.copytree(".", work)
    for root, _dirs, files in os.walk(work):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    shutil.copy(os.path.join(HERE, "pinned_tests.py"), os.path.join(work, "test_median.py"))
    quiet = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:xdist.looponfail",
             "-p", "no:anyio", "-p", "no:hypothesispytest", "-p", "no:platformdirs"]
    code = subprocess.call([sys.executable, "-m", "pytest", *quiet, "test_median.py"],
                           cwd=work, timeout=60)
sys.exit(0 if code == 0 else 1)
