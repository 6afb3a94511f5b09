import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Bytecode caches for the test run. With PYTHONDONTWRITEBYTECODE set (as in some sandboxes and CI images) and
# make setup's pip --no-compile, no process ever finds a cached torch: each one that imports it (every kernel of
# nbval, each torchrun agent and worker, each launch's forkserver) compiles ~2,300 source files again, ~3.5 s of
# CPU more than loading them cached. Here they are cached outside the source tree, in build/pycache/ (the pytest
# process from now on, and every process it starts), written atomically by whichever process compiles a file first.
# DISTLEARN_TEST_PYCACHE=0 turns this off (and an explicit PYTHONPYCACHEPREFIX is kept).
if (os.environ.get("PYTHONDONTWRITEBYTECODE") and "PYTHONPYCACHEPREFIX" not in os.environ
        and os.environ.get("DISTLEARN_TEST_PYCACHE", "1") != "0"):
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = str(ROOT / "build" / "pycache")
    sys.dont_write_bytecode = False
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
