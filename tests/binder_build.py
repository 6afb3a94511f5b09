"""Build the Binder environment from ``binder/`` as repo2docker does, measure it and try it (``make test-binder``).

Not part of ``make test``: it downloads and installs everything (torch's CPU wheel is about 190 MB), a few minutes.

repo2docker's order for a repository with ``binder/runtime.txt`` and ``binder/requirements.txt`` (its Python build
pack, ``repo2docker/buildpacks/python/__init__.py``): the Python named in ``runtime.txt`` (here ``python3.X -m venv``
instead of its conda environment), then ``pip install --no-cache-dir -r binder/requirements.txt`` in that
environment, then ``binder/postBuild`` run from the repository with that environment first on ``PATH``. This script
copies the repository (its tracked and not-ignored files, or those of ``--ref``) to a temporary folder and does the
same there, then:

- measures the build time (seconds, per step and in all) and the environment's size (``du`` of the virtual
  environment in bytes; printed in GB = 1e9 bytes and GiB = 2**30 bytes). repo2docker's image also holds its own
  base environment (Python, JupyterLab, Node), which is not measured here; JupyterLab is, as the requirements
  install it as well;
- executes one chapter (``--notebook``, default ``notebooks/01_memory.ipynb``) top to bottom with nbclient in that
  environment: a cell that raises fails the build;
- starts JupyterLab there and asks its translations API (``/lab/api/translations``) for its language packs:
  ``zh_CN`` must be listed, and its Chinese strings served, so that a Chinese reader gets Chinese menus
  (Settings → Language), and ``jupyter labextension list`` must show the widgets and cell-tag extensions;
- reports whether DeepSpeed is importable (chapter 09).

Exit status 0 when all of that worked and the build is within ``--max-gb`` and ``--max-seconds``; the report is
printed as JSON (and written to ``--json``). Errors: a missing ``python3.X`` for ``runtime.txt`` exits with a
bilingual message.

``--torch-from DIR``: where download.pytorch.org cannot be reached (a machine without it), the requirements'
``--extra-index-url``/``--index-url`` lines are dropped and ``--find-links DIR`` (a folder holding the torch CPU
wheel) added instead; the report says so (the wheel's download time is then not measured).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _msg(en: str, zh: str) -> str:
    return f"{en} / {zh}"


def copy_repo(dest: Path, ref: str | None) -> None:
    """The repository's files as repo2docker sees them: ``git archive ref`` or, without ``ref``, the working
    tree's tracked and not-ignored untracked files."""
    dest.mkdir(parents=True)
    if ref:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
        return
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"],
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def python_for(runtime: str) -> str:
    """``python-3.11`` → the ``python3.11`` on PATH."""
    version = runtime.strip().removeprefix("python-")
    exe = shutil.which(f"python{'.'.join(version.split('.')[:2])}")
    if exe is None:
        sys.exit(_msg(f"binder/runtime.txt asks for Python {version}; install python{version} to build it here",
                      f"binder/runtime.txt 要求 Python {version}；请先安装 python{version} 再在本机构建"))
    return exe


def requirements_for(repo: Path, torch_from: str | None) -> tuple[Path, list[str]]:
    """``binder/requirements.txt`` as is, or (``torch_from``) without its index lines and with ``--find-links``."""
    path = repo / "binder" / "requirements.txt"
    if not torch_from:
        return path, []
    kept = [ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith(("--extra-index-url",
                                                                                      "--index-url", "-i "))]
    changed = repo / "binder" / "requirements.measured.txt"
    changed.write_text("\n".join([f"--find-links {torch_from}", *kept]) + "\n")
    return changed, [f"index lines dropped, torch from --find-links {torch_from}"]


def cpu_seconds() -> float:
    """User + system CPU time of the finished child processes so far (less sensitive than wall time to a busy
    machine)."""
    import resource

    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def timed(cmd, **kw) -> float:
    start = time.monotonic()
    subprocess.run(cmd, check=True, **kw)
    took = round(time.monotonic() - start, 1)
    print(f"[{took:7.1f} s] {' '.join(map(str, cmd))}", file=sys.stderr, flush=True)
    return took


def du_bytes(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(path)], check=True, capture_output=True, text=True).stdout.split()[0])


RUN_NOTEBOOK = r"""
import sys, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
print(sum(c.cell_type == "code" for c in nb.cells), "code cells ran")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def language_packs(venv: Path, repo: Path, env: dict) -> dict:
    """Start JupyterLab in ``venv`` and read its translations API: the language packs it lists, and how many
    strings the ``zh_CN`` pack serves."""
    port, token = free_port(), "binder-check"
    log = open(repo.parent / "jupyterlab.log", "w+")
    lab = subprocess.Popen([str(venv / "bin" / "jupyter"), "lab", "--no-browser", f"--port={port}",
                            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={repo}", "--ip=127.0.0.1",
                            *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],
                           env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}/lab/api/translations"
    try:
        for _ in range(120):
            if lab.poll() is not None:
                raise RuntimeError(_msg("JupyterLab stopped", "JupyterLab 已退出") + ": " + (repo.parent / "jupyterlab.log").read_text()[-2000:])
            try:
                with urllib.request.urlopen(f"{base}?token={token}", timeout=5) as r:
                    listed = json.load(r)["data"]
                break
            except OSError:
                time.sleep(1)
        else:
            raise RuntimeError(_msg("JupyterLab did not answer within 120 s", "JupyterLab 120 秒内没有响应"))
        with urllib.request.urlopen(f"{base}/zh_CN?token={token}", timeout=30) as r:
            zh = json.load(r)["data"]
    finally:
        lab.terminate()
        lab.wait(30)
        log.close()
    return {"listed": sorted(listed), "zh_CN_domains": len(zh), "zh_CN_edit_menu": zh.get("jupyterlab", {})
            .get("Edit", "")}


def build(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="binder-build-", dir=args.tmp))
    repo, venv = work / "repo", work / "venv"
    copy_repo(repo, args.ref)
    runtime = (repo / "binder" / "runtime.txt").read_text().strip()
    python = python_for(runtime)
    requirements, notes = requirements_for(repo, args.torch_from)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_FIND_LINKS")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    steps = {}
    start, cpu_start = time.monotonic(), cpu_seconds()
    steps["venv"] = timed([python, "-m", "venv", str(venv)], env=env)
    steps["requirements"] = timed([str(venv / "bin" / "pip"), "install", "--no-cache-dir", "-q", "-r",
                                   str(requirements)], cwd=repo, env=env)
    post = repo / "binder" / "postBuild"
    steps["postBuild"] = timed(["bash", str(post)], cwd=repo, env=env) if post.exists() else 0.0
    total, cpu = round(time.monotonic() - start, 1), round(cpu_seconds() - cpu_start, 1)
    size = du_bytes(venv)
    report = {"ref": args.ref or "working tree", "runtime": runtime, "python": python, "notes": notes,
              "seconds": total, "cpu_seconds": cpu, "steps_seconds": steps,
              "load_average_1min": round(os.getloadavg()[0], 1), "bytes": size, "GB": round(size / 1e9, 3),
              "GiB": round(size / 2**30, 3), "machine": f"{os.cpu_count()} CPU(s), {os.uname().machine}"}
    biggest = subprocess.run(f"du -sb {venv}/lib/python*/site-packages/* | sort -rn | head -8", shell=True,
                             capture_output=True, text=True).stdout.split("\n")
    report["largest"] = {Path(p).name: round(int(b) / 1e6) for b, p in (ln.split("\t") for ln in biggest if ln)}
    py = str(venv / "bin" / "python")
    ds = subprocess.run([py, "-c", "import deepspeed; print(deepspeed.__version__)"], env=env, capture_output=True,
                        text=True)
    # its last line: importing DeepSpeed first logs which accelerator it chose
    report["deepspeed"] = ds.stdout.strip().splitlines()[-1] if ds.returncode == 0 else "not installed"
    exts = subprocess.run([str(venv / "bin" / "jupyter"), "labextension", "list"], env=env, capture_output=True,
                          text=True)
    report["labextensions"] = sorted({w for w in (exts.stdout + exts.stderr).split() if w.startswith(("@", "jupyterlab-"))
                                      and "enabled" not in w})
    if args.notebook:
        nb = repo / args.notebook
        start = time.monotonic()
        out = subprocess.run([py, "-c", RUN_NOTEBOOK, str(nb), str(nb.parent)], env=env, capture_output=True,
                             text=True, cwd=nb.parent)
        report["notebook"] = {"path": args.notebook, "ok": out.returncode == 0,
                              "seconds": round(time.monotonic() - start, 1),
                              "tail": (out.stdout + out.stderr).strip().splitlines()[-3:]}
    try:
        report["language_packs"] = language_packs(venv, repo, env)
    except RuntimeError as e:
        report["language_packs"] = {"listed": [], "zh_CN_domains": 0, "zh_CN_edit_menu": "", "error": str(e)}
    report["work"] = str(work)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return report


def problems(report: dict, args) -> list[str]:
    found = []
    if report["GB"] >= args.max_gb:
        found.append(f"size {report['GB']} GB ≥ {args.max_gb} GB / 大小超出目标")
    if report["seconds"] >= args.max_seconds:
        found.append(f"build {report['seconds']} s ≥ {args.max_seconds} s / 构建时间超出目标")
    if args.notebook and not report["notebook"]["ok"]:
        found.append(f"{args.notebook} failed / 执行失败: {report['notebook']['tail']}")
    packs = report["language_packs"]
    if "zh_CN" not in packs["listed"] or not packs["zh_CN_domains"] or not packs["zh_CN_edit_menu"]:
        found.append(f"no Chinese language pack served / 没有提供中文语言包: {packs}")
    for ext in ("@jupyter-widgets/jupyterlab-manager", "jupyterlab-celltagsclasses"):
        if ext not in report["labextensions"]:
            found.append(f"lab extension {ext} missing / 缺少 JupyterLab 扩展 {ext}")
    if args.require_deepspeed and report["deepspeed"] == "not installed":
        found.append("DeepSpeed not installed (chapter 09) / 未安装 DeepSpeed（第 09 章）")
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ref", help="build binder/ of this git ref instead of the working tree (e.g. HEAD~3)")
    p.add_argument("--notebook", default="notebooks/01_memory.ipynb", help="chapter to run ('' for none)")
    p.add_argument("--torch-from", help="folder with the torch CPU wheel, used instead of download.pytorch.org")
    p.add_argument("--tmp", default=None, help="where the temporary build goes (default: the system's)")
    p.add_argument("--keep", action="store_true", help="keep the build folder")
    p.add_argument("--max-gb", type=float, default=1.5, help="size goal, GB = 1e9 bytes (default 1.5)")
    p.add_argument("--max-seconds", type=float, default=500, help="build-time goal in seconds (default 500)")
    p.add_argument("--require-deepspeed", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--json", help="also write the report here")
    args = p.parse_args(argv)
    report = build(args)
    report["problems"] = problems(report, args)
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
