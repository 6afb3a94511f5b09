"""A classroom on one machine (``make classroom``): JupyterHub with one account, one single-user JupyterLab server,
one kernel per notebook and one copy of the course per student, and limits so that one student's 8-process lab
cannot starve the room.

::

    python -m authoring.classroom start --students students.txt [--ip 0.0.0.0] [--port 8000] [--dir build/classroom]
    python -m authoring.classroom passwords [--dir build/classroom]
    python -m authoring.classroom collect --course my-course 07_overlap_prefetch [--dir build/classroom]

``students.txt``: one student a line, ``name [en|zh|both]`` (the course's language for that student; default
both), ``#`` starts a comment. Names: lower-case letters, digits, ``-`` and ``_``, at most 32 characters.

What each part does (docs/teaching.md tells it for teachers):

- **Accounts**: :class:`ClassroomAuthenticator`, one password per student in ``DIR/passwords.txt`` (``name
  password`` a line, mode 0600), made for every new student and kept for the others; only the listed students may
  log in. Hand each student their line.
- **One server per student**: :class:`ClassroomSpawner`, JupyterHub's ``SimpleLocalProcessSpawner`` (no Unix
  accounts needed) with the home ``DIR/home/<name>/``: each student's JupyterLab serves that folder only and its
  kernels start there. All servers run as the hub's own Unix user, so this separates the students' files and
  kernels for honest use, not against a student who types ``open('../other/…')`` in a kernel: a real server gives
  each student a Unix account (``LocalProcessSpawner``, ``SystemdSpawner``) or a container (``DockerSpawner``).
- **One copy of the course per student** (:func:`hand_out`, at every start of the student's server): the chapters
  and the exercises in the student's language (``courses/<lang>/``, or the bilingual ones), not the solutions. A
  file is copied when the student does not have it; replaced by the newer course's when the student never changed
  it; and when the student did change it, kept as it is, the newer course's version written beside it as
  ``NAME.course-update.ipynb``. ``.distlearn-handout.json`` in the home remembers what was handed out. The
  exercises carry nbgrader's metadata on their check and answer cells, so what a student saves can be graded.
- **Grading** (:func:`collect`): every student's saved exercise copied into an nbgrader course's ``submitted/``;
  then ``nbgrader autograde`` and ``nbgrader export`` (docs/teaching.md).
- **Limits**, for every process of the student's server (:func:`student_environment`, :mod:`distlearn.core.limits`):
  at most ``max_ranks`` processes per lab, at most ``lab_slots`` lab processes at once in the whole room (a lab
  waits, saying so, for free slots), lab processes reniced. Where the machine lets the hub write cgroups (v1 or
  v2, as root), also a memory limit, a CPU limit (``cpus`` cores) and a process limit per student, with equal CPU
  shares: :class:`Cgroups`. The hub's log says which limits it enforces.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import socket
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from authoring.paths import COPIES_DIR, ROOT

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
LANGS = ("en", "zh", "both")
HANDOUT_RECORD = ".distlearn-handout.json"
UPDATE_SUFFIX = ".course-update"
HANDED_OUT = ("notebooks", "exercises")  # not solutions/ / 不发 solutions/
DEFAULT_DIR = ROOT / "build" / "classroom"
NBGRADER_EXTENSIONS = ("formgrader", "assignment_list", "course_list", "validate_assignment")
NBGRADER_LAB_EXTENSION = "@jupyter/nbgrader"  # its JupyterLab extension (share/jupyter/labextensions/) / 其 JupyterLab 扩展


def _error(param: str, en: str, zh: str):
    from distlearn.core.validate import DistlearnValueError

    return DistlearnValueError(param, en, zh, bilingual=True)


# ---------------------------------------------------------------- students
def read_students(text: str) -> dict[str, str]:
    """``{name: lang}`` from a students file's text (``name [en|zh|both]`` a line, ``#`` comments). Raises
    DistlearnValueError (parameter ``students``) naming the line for a bad name, language or a repeated name."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        name, lang = words[0], (words[1] if len(words) > 1 else "both")
        if not NAME.match(name) or len(words) > 2 or lang not in LANGS or name in out:
            why_en = ("a repeated name" if name in out else f"a language in {LANGS}" if NAME.match(name) else
                      "a name of lower-case letters, digits, - and _ (at most 32 characters)")
            why_zh = ("重复的名字" if name in out else f"语言应为 {LANGS} 之一" if NAME.match(name) else
                      "名字只能由小写字母、数字、- 和 _ 组成（最多 32 个字符）")
            raise _error("students", f"students line {number}: {line.strip()!r}: expected `name [en|zh|both]`, "
                         f"{why_en}.", f"students 第 {number} 行：{line.strip()!r}：应为 `名字 [en|zh|both]`，{why_zh}。")
        out[name] = lang
    if not out:
        raise _error("students", "students: no student listed (one `name [en|zh|both]` a line).",
                     "students：没有列出任何学生（每行一个 `名字 [en|zh|both]`）。")
    return out


def passwords(folder: Path, students) -> dict[str, str]:
    """Each student's password, from ``folder/passwords.txt``; a new student gets a new random one (kept there,
    mode 0600). Students no longer listed keep their line (and cannot log in: the hub allows the listed ones)."""
    path = Path(folder) / "passwords.txt"
    table = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                name, password = line.split(None, 1)
                table[name] = password.strip()
    new = [s for s in students if s not in table]
    for name in new:
        table[name] = secrets.token_urlsafe(9)
    if new or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "# name password: hand each student their line / 把每位学生的那一行发给他\n" + "".join(
            f"{n} {p}\n" for n, p in table.items())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
    return table


# ---------------------------------------------------------------- the course, one copy per student
def course_files(lang: str, root: Path = ROOT) -> dict[str, Path]:
    """What a student in ``lang`` gets: ``{relative path in the home: source file}``, the chapters and exercises
    (``courses/<lang>/`` for one language, the bilingual ones for ``"both"``)."""
    base = Path(root) if lang == "both" else Path(root) / COPIES_DIR / lang
    return {f"{d}/{p.name}": p for d in HANDED_OUT for p in sorted((base / d).glob("*.ipynb"))}


def _digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def handout_bytes(rel: str, src: Path) -> bytes:
    """What the student gets for the course file ``src`` (at ``rel`` in their home): a chapter as it is; an exercise
    with nbgrader's metadata on its check and answer cells (:func:`authoring.grading.mark_for_grading`), so that
    what the student saves can be autograded as it is."""
    if not rel.startswith("exercises/"):
        return Path(src).read_bytes()
    import nbformat

    from authoring.grading import mark_for_grading

    return (nbformat.writes(mark_for_grading(nbformat.read(src, as_version=4))) + "\n").encode("utf-8")


def hand_out(home: Path, lang: str, root: Path = ROOT) -> dict[str, list[str]]:
    """Give the student in ``home`` the course in ``lang`` without touching their work: a missing file is copied,
    a file the student never changed is replaced by the course's newer version, a file the student changed is kept
    and the newer version written beside it as ``NAME.course-update.ipynb``. Exercises carry nbgrader's metadata
    (:func:`handout_bytes`). Returns the relative paths by what
    happened: ``{"copied": [...], "updated": [...], "kept": [...]}`` (an unchanged file appears in none)."""
    home = Path(home)
    record_path = home / HANDOUT_RECORD
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.exists() else {}
    done: dict[str, list[str]] = {"copied": [], "updated": [], "kept": []}
    for rel, src in course_files(lang, root).items():
        body = handout_bytes(rel, src)
        dst, new = home / rel, hashlib.sha256(body).hexdigest()
        if not dst.exists():
            what = "copied"
        elif record.get(rel) == new:
            continue                            # the course did not change this file
        elif _digest(dst) in (record.get(rel), new):
            what = "updated"                    # the student's file is the one handed out before: take the new one
        else:
            what = "kept"                       # the student's work stays; the new version goes beside it
            dst = dst.with_name(dst.stem + UPDATE_SUFFIX + dst.suffix)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(body)
        if what != "kept":
            record[rel] = new
        done[what].append(rel)
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    return done


# ---------------------------------------------------------------- limits
@dataclass
class Limits:
    """Per-student limits. ``memory_gib``: GiB (2**30 bytes) of memory for all of a student's processes;
    ``cpus``: cores of CPU time at most; ``pids``: processes and threads at most (the last three need writable
    cgroups); ``max_ranks``: processes per lab; ``lab_slots``: lab processes at once in the whole room;
    ``nice``: niceness of lab processes."""
    memory_gib: float = 3.0
    cpus: float = 2.0
    pids: int = 2048
    max_ranks: int = 8
    lab_slots: int = 0          # 0: the machine's cores, at least max_ranks / 0：机器的核数，至少 max_ranks
    nice: int = 10

    def checked(self) -> "Limits":
        from distlearn.core.validate import check_int, check_positive

        check_positive("memory_gib", self.memory_gib)
        check_positive("cpus", self.cpus)
        check_int("pids", self.pids, minimum=64, maximum=1 << 22)
        check_int("max_ranks", self.max_ranks, minimum=1, maximum=64)
        check_int("nice", self.nice, minimum=0, maximum=19)
        slots = self.lab_slots or max(os.cpu_count() or 1, self.max_ranks)
        check_int("lab_slots", slots, minimum=self.max_ranks, maximum=1024)
        return Limits(self.memory_gib, self.cpus, self.pids, self.max_ranks, slots, self.nice)


def student_environment(lang: str, home: Path, limits: Limits, slots_dir: Path) -> dict[str, str]:
    """The environment of a student's server, its kernels and labs: the course's language (and JupyterLab's menus
    in it, :func:`authoring.lab.lab_environment`) and the lab limits of :mod:`distlearn.core.limits`."""
    from authoring.lab import lab_environment
    from distlearn.core import limits as L

    env = lab_environment(lang, Path(home))
    env.update({L.ENV_MAX_RANKS: str(limits.max_ranks), L.ENV_SLOTS: str(limits.lab_slots),
                L.ENV_SLOTS_DIR: str(slots_dir), L.ENV_NICE: str(limits.nice)})
    return env


CGROUP_ROOT = Path("/sys/fs/cgroup")


class Cgroups:
    """A student's cgroups under ``group`` (e.g. ``distlearn-classroom-8000/alice``): memory, CPU and process
    limits for every process of their server, cgroup v1 (``/sys/fs/cgroup/<controller>/…``) or v2
    (``/sys/fs/cgroup/…``). :meth:`create` makes them and returns what it enforces (empty where the machine does
    not let us write cgroups: then none is), :meth:`join` moves the calling process in (called in the new server
    process before it starts), :meth:`remove` deletes them once empty."""

    def __init__(self, group: str, limits: Limits, root: Path = CGROUP_ROOT):
        self.group, self.limits, self.root = group, limits, Path(root)
        self.dirs: list[Path] = []

    def _v2(self) -> bool:
        return (self.root / "cgroup.controllers").exists()

    def create(self) -> list[str]:
        mem = int(self.limits.memory_gib * 2**30)
        period = 100_000
        quota = int(self.limits.cpus * period)
        plan = ({"": {"memory.max": mem, "cpu.max": f"{quota} {period}", "pids.max": self.limits.pids}}
                if self._v2() else
                {"memory": {"memory.limit_in_bytes": mem}, "cpu": {"cpu.cfs_period_us": period,
                                                                     "cpu.cfs_quota_us": quota},
                 "pids": {"pids.max": self.limits.pids}})
        enforced = []
        for controller, files in plan.items():
            path = self.root / controller / self.group if controller else self.root / self.group
            try:
                if not controller:  # v2: the controllers must be enabled for the children of every parent
                    parent = self.root
                    for part in Path(self.group).parts:
                        (parent / "cgroup.subtree_control").write_text("+memory +cpu +pids")
                        parent = parent / part
                        parent.mkdir(exist_ok=True)
                path.mkdir(parents=True, exist_ok=True)
                for name, value in files.items():
                    (path / name).write_text(str(value))
            except OSError:
                continue
            self.dirs.append(path)
            enforced += [name.split(".")[0] for name in files]
        return sorted(set(enforced))

    def join(self) -> None:
        pid = str(os.getpid())
        for path in self.dirs:
            (path / "cgroup.procs").write_text(pid)

    def remove(self, wait: float = 5.0) -> None:
        """Delete the groups, waiting up to ``wait`` seconds for their last processes to be gone."""
        import time

        deadline = time.monotonic() + wait
        for path in self.dirs:
            while path.exists():
                try:
                    path.rmdir()
                except OSError:  # processes still ending / 进程仍在退出
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
            try:
                path.parent.rmdir()
            except OSError:
                pass  # other students' groups are still there / 其他学生的组还在


# ---------------------------------------------------------------- JupyterHub parts
@dataclass
class Settings:
    """What ``jupyterhub_config.py`` in the classroom folder reads (``classroom.json``)."""
    folder: str
    students: dict
    ip: str = "0.0.0.0"
    port: int = 8000
    hub_port: int = 0
    proxy_api_port: int = 0
    limits: dict = field(default_factory=dict)
    root: str = str(ROOT)
    server_args: list = field(default_factory=list)  # more options for every student's server / 学生服务器的额外参数

    def save(self) -> Path:
        path = Path(self.folder) / "classroom.json"
        path.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: Path) -> "Settings":
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


def _hub_classes():
    """The authenticator and spawner classes (imported only where JupyterHub is installed: the .[classroom] extra)."""
    from jupyterhub.auth import Authenticator
    from jupyterhub.spawner import SimpleLocalProcessSpawner
    from traitlets import Dict, Unicode

    class ClassroomAuthenticator(Authenticator):
        """Each listed student logs in with their own password from ``passwords_file``."""
        passwords_file = Unicode(config=True, help="name password, one a line")

        async def authenticate(self, handler, data):
            import hmac

            name = self.normalize_username(data.get("username", ""))
            table = passwords(Path(self.passwords_file).parent, [])
            given = data.get("password", "")
            if name in table and hmac.compare_digest(table[name].encode(), given.encode()):
                return name
            return None

    class ClassroomSpawner(SimpleLocalProcessSpawner):
        """One JupyterLab per student in ``home/<name>``, with their own copy of the course and the room's limits."""
        classroom = Dict(config=True, help="Settings as a dict (classroom.json)")

        def _settings(self) -> Settings:
            return Settings(**self.classroom)

        def _limits(self) -> Limits:
            return Limits(**self._settings().limits).checked()

        async def start(self):
            s = self._settings()
            lang = s.students.get(self.user.name, "both")
            done = hand_out(Path(self.home_dir), lang, Path(s.root))
            self.log.info("course for %s (%s): %s", self.user.name, lang,
                          {k: len(v) for k, v in done.items()})
            limits = self._limits()
            self._cgroups = Cgroups(f"distlearn-classroom-{s.port}/{self.user.name}", limits)
            enforced = self._cgroups.create()
            self.log.info("limits for %s: %d processes per lab, %d lab processes in the room, nice %d; cgroups: %s",
                          self.user.name, limits.max_ranks, limits.lab_slots, limits.nice,
                          ", ".join(enforced) or "none (not writable here: memory and CPU are not limited)")
            self.environment = {**self.environment,
                                **student_environment(lang, Path(self.home_dir), limits,
                                                      Path(s.folder) / "lab-slots"),
                                "JUPYTER_CONFIG_DIR": str(Path(s.folder) / "jupyter-config")}
            return await super().start()

        def make_preexec_fn(self, name):
            base = super().make_preexec_fn(name)
            cgroups = getattr(self, "_cgroups", None)

            def preexec():
                base()
                if cgroups is not None:
                    cgroups.join()

            return preexec

        async def stop(self, now=False):
            import psutil

            try:  # the server's kernels and their labs' processes (a forkserver) live in sessions of their own
                left = psutil.Process(self.pid).children(recursive=True) if self.pid else []
            except psutil.Error:
                left = []
            await super().stop(now=now)
            for p in left:  # what the server did not end with itself / 服务器自己没有结束的进程
                try:
                    p.kill()
                except psutil.Error:
                    pass
            psutil.wait_procs(left, timeout=5)
            if getattr(self, "_cgroups", None) is not None:
                self._cgroups.remove()

    return ClassroomAuthenticator, ClassroomSpawner


def configure(c, settings_path) -> None:
    """Fill JupyterHub's config ``c`` from ``classroom.json`` (called by the folder's ``jupyterhub_config.py``)."""
    s = Settings.load(settings_path)
    folder = Path(s.folder)
    auth, spawner = _hub_classes()
    c.JupyterHub.ip, c.JupyterHub.port = s.ip, s.port
    c.JupyterHub.hub_ip = "127.0.0.1"
    if s.hub_port:
        c.JupyterHub.hub_port = s.hub_port
    if s.proxy_api_port:
        c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.proxy_api_port}"
    c.JupyterHub.db_url = f"sqlite:///{folder / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(folder / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(folder / "jupyterhub.pid")
    c.JupyterHub.authenticator_class = auth
    c.ClassroomAuthenticator.passwords_file = str(folder / "passwords.txt")
    c.Authenticator.allowed_users = set(s.students)
    c.JupyterHub.spawner_class = spawner
    c.ClassroomSpawner.classroom = asdict(s)
    c.ClassroomSpawner.home_dir_template = str(folder / "home" / "{username}")
    c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
    c.Spawner.args = (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []) + list(s.server_args)
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = c.Spawner.http_timeout = 180  # 40 servers starting at once on a busy machine
    c.JupyterHub.cleanup_servers = True
    # The Python proxy ends a proxied request after 20 s by default (tornado's request_timeout), the stream of the
    # "your server is starting" page included: with 40 servers starting at once that page showed an error instead
    # of the student's JupyterLab. 10 minutes.
    c.ConfigurableHTTPProxy.command = ["configurable-http-proxy", "--proxy-timeout", "600000"]


CONFIG_FILE = '''# Written by python -m authoring.classroom: JupyterHub reads the classroom from classroom.json beside this file.
import sys
sys.path.insert(0, {root!r})  # this checkout's authoring/ / 本检出目录中的 authoring/
from authoring.classroom import configure
configure(c, {settings!r})  # noqa: F821 (c: JupyterHub's config) / c 是 JupyterHub 的配置对象
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def internal_ports(port: int, hub_port: int = 0, proxy_api_port: int = 0) -> tuple[int, int]:
    """The hub's API port and the proxy's API port, both on 127.0.0.1 only: as given, or for 0 a free port each.
    JupyterHub's own defaults, 8081 and 8001, would clash with a second classroom (or anything else on them) on the
    same machine. Raises DistlearnValueError naming the parameter for a port outside 0..65535 or equal to another."""
    from distlearn.core.validate import check_int

    check_int("hub_port", hub_port, minimum=0, maximum=65535)
    check_int("proxy_api_port", proxy_api_port, minimum=0, maximum=65535)
    taken = {port}
    chosen = []
    for name, given in (("hub_port", hub_port), ("proxy_api_port", proxy_api_port)):
        value = given
        while not value or (value in taken and not given):
            value = free_port()
        if value in taken:
            raise _error(name, f"{name} {value} is already the port of the hub or of the proxy's API; give "
                         "another (1..65535) or 0 for a free one.",
                         f"{name} {value} 已被 hub 或代理 API 使用；请换一个（1..65535），或写 0 自动选空闲端口。")
        taken.add(value)
        chosen.append(value)
    return chosen[0], chosen[1]


def prepare(folder: Path, students: dict[str, str], ip: str = "0.0.0.0", port: int = 8000, limits: Limits = None,
            hub_port: int = 0, proxy_api_port: int = 0, root: Path = ROOT, server_args=()) -> Path:
    """Write the classroom folder (``classroom.json``, ``jupyterhub_config.py``, ``passwords.txt``) and return the
    config file's path. ``hub_port`` / ``proxy_api_port`` 0: JupyterHub's defaults (8081 / 8001);
    ``server_args``: more command-line options for every student's server."""
    from distlearn.core.validate import check_int

    check_int("port", port, minimum=1, maximum=65535)
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    limits = (limits or Limits()).checked()
    settings = Settings(str(folder), dict(students), ip, port, hub_port, proxy_api_port, asdict(limits), str(root),
                        list(server_args))
    path = settings.save()
    passwords(folder, students)
    # The students' Jupyter configuration (JUPYTER_CONFIG_DIR of every student's server): nbgrader's server
    # extensions off — the teacher grades outside the students' servers, and each took 4 s to import per server.
    jupyter = folder / "jupyter-config"
    jupyter.mkdir(exist_ok=True)
    (jupyter / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {f"nbgrader.server_extensions.{x}": False for x in NBGRADER_EXTENSIONS}}},
        indent=1), encoding="utf-8")
    # ... and its JupyterLab part too: without its server it showed every student a teacher's "Nbgrader" menu, a
    # "Create Assignment" panel and a "Validate" button that could only fail.
    (jupyter / "labconfig").mkdir(exist_ok=True)
    (jupyter / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {NBGRADER_LAB_EXTENSION: True}}, indent=1), encoding="utf-8")
    config = folder / "jupyterhub_config.py"
    config.write_text(CONFIG_FILE.format(settings=str(path), root=str(root)), encoding="utf-8")
    return config


def hub_command(config: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment that start the hub on ``config`` (the venv's ``bin`` first on PATH: the Python
    ``configurable-http-proxy`` lives there)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return [sys.executable, "-m", "jupyterhub", "-f", str(config)], env


def collect(course: Path, assignments, folder: Path = DEFAULT_DIR) -> dict[str, dict[str, str]]:
    """Copy each listed student's saved exercise into the nbgrader course ``course`` (the folder that ``python -m
    authoring.grading --out course`` wrote), ready for ``nbgrader autograde``:
    ``DIR/home/<name>/exercises/<a>.ipynb`` → ``course/submitted/<name>/<a>/<a>.ipynb``, with nbgrader's metadata
    on its check and answer cells (:func:`authoring.grading.mark_for_grading`, for copies handed out before it was
    added) and nbgrader's ``timestamp.txt``: when the student last saved it, UTC. A submission already there is
    replaced. Returns ``{name: {assignment: what}}``, ``what`` one of ``"collected"``, ``"unchanged"`` (collected,
    but the student never changed the handed-out copy: it scores 0) and ``"missing"`` (no such file: nothing
    copied). Raises DistlearnValueError: ``folder`` without ``classroom.json``, ``course`` without
    ``source/<a>/<a>.ipynb``."""
    import datetime

    import nbformat

    from authoring.grading import mark_for_grading

    folder, course = Path(folder), Path(course)
    if not (folder / "classroom.json").exists():
        raise _error("dir", f"dir: {folder} has no classroom.json; give the folder of `make classroom` "
                     "(default build/classroom).",
                     f"dir：{folder} 中没有 classroom.json；请给出 `make classroom` 用的文件夹（默认 build/classroom）。")
    for a in assignments:
        if not (course / "source" / a / f"{a}.ipynb").exists():
            raise _error("course", f"course: {course / 'source' / a / (a + '.ipynb')} does not exist; write the "
                         f"nbgrader course first: python -m authoring.grading --out {course} {a}.",
                         f"course：没有 {course / 'source' / a / (a + '.ipynb')}；请先生成 nbgrader 课程："
                         f"python -m authoring.grading --out {course} {a}。")
    settings = Settings.load(folder / "classroom.json")
    done: dict[str, dict[str, str]] = {}
    for name in settings.students:
        home = folder / "home" / name
        record_path = home / HANDOUT_RECORD
        record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.exists() else {}
        done[name] = {}
        for a in assignments:
            rel = f"exercises/{a}.ipynb"
            src = home / rel
            if not src.exists():
                done[name][a] = "missing"
                continue
            done[name][a] = "unchanged" if record.get(rel) == _digest(src) else "collected"
            target = course / "submitted" / name / a
            target.mkdir(parents=True, exist_ok=True)
            nbformat.write(mark_for_grading(nbformat.read(src, as_version=4)), target / f"{a}.ipynb")
            saved = datetime.datetime.fromtimestamp(src.stat().st_mtime, datetime.timezone.utc)
            (target / "timestamp.txt").write_text(saved.strftime("%Y-%m-%d %H:%M:%S.%f UTC"), encoding="utf-8")
    return done


WHAT = {"collected": ("collected", "已收取"), "unchanged": ("collected, never changed: scores 0", "已收取，但从未改动：得 0 分"),
        "missing": ("no file: not collected", "没有这个文件：未收取")}


def main(argv: list[str] | None = None) -> int:
    from distlearn.core.i18n import bi

    ap = argparse.ArgumentParser(description="A classroom on one machine: JupyterHub, one server and one copy of "
                                 "the course per student (docs/teaching.md) / 一台机器上的课堂")
    sub = ap.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="write the classroom folder and start the hub / 写好课堂文件夹并启动 hub")
    start.add_argument("--students", required=True, help="file: `name [en|zh|both]` a line / 学生名单文件")
    start.add_argument("--dir", default=str(DEFAULT_DIR))
    start.add_argument("--ip", default="0.0.0.0")
    start.add_argument("--port", type=int, default=8000)
    for name, kind in (("memory_gib", float), ("cpus", float), ("pids", int), ("max_ranks", int),
                       ("lab_slots", int), ("nice", int)):
        start.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(Limits(), name))
    start.add_argument("--hub-port", type=int, default=0,
                       help="the hub's API port on 127.0.0.1 (default 0: a free one) / hub API 端口（默认 0：自动选空闲端口）")
    start.add_argument("--proxy-api-port", type=int, default=0,
                       help="the proxy's API port on 127.0.0.1 (default 0: a free one) / 代理 API 端口（默认 0：自动选空闲端口）")
    col = sub.add_parser("collect", help="copy every student's exercise into an nbgrader course's submitted/ / "
                         "把每位学生的练习复制到 nbgrader 课程的 submitted/")
    col.add_argument("assignments", nargs="+", help="e.g. 07_overlap_prefetch")
    col.add_argument("--course", default="nbgrader-course", help="the folder python -m authoring.grading wrote "
                     "(default nbgrader-course) / python -m authoring.grading 写的文件夹")
    col.add_argument("--dir", default=str(DEFAULT_DIR))
    pw = sub.add_parser("passwords", help="print each student's password / 打印每位学生的密码")
    pw.add_argument("--dir", default=str(DEFAULT_DIR))
    args = ap.parse_args(argv)
    if args.command == "passwords":
        path = Path(args.dir) / "passwords.txt"
        print(path.read_text(encoding="utf-8") if path.exists() else bi(f"no {path} yet", f"还没有 {path}"))
        return 0
    if args.command == "collect":
        done = collect(Path(args.course), args.assignments, Path(args.dir))
        for name, row in done.items():
            for a, what in row.items():
                print(f"{name:<16} {a:<24} " + bi(*WHAT[what]))
        print(bi(f"next: cd {args.course} && nbgrader autograde {' '.join(args.assignments)} && nbgrader export",
                 f"下一步：cd {args.course} && nbgrader autograde {' '.join(args.assignments)} && nbgrader export"))
        return 0
    students = read_students(Path(args.students).read_text(encoding="utf-8"))
    limits = Limits(args.memory_gib, args.cpus, args.pids, args.max_ranks, args.lab_slots, args.nice)
    hub_port, proxy_api_port = internal_ports(args.port, args.hub_port, args.proxy_api_port)
    config = prepare(Path(args.dir), students, args.ip, args.port, limits, hub_port, proxy_api_port)
    host = socket.gethostname() if args.ip in ("0.0.0.0", "") else args.ip
    print(bi(f"Classroom for {len(students)} students in {config.parent}. Hand out http://{host}:{args.port}/ and "
             f"each student's line of {config.parent / 'passwords.txt'}. Stop with Ctrl-C.",
             f"课堂（{len(students)} 位学生）位于 {config.parent}。把 http://{host}:{args.port}/ 和 "
             f"{config.parent / 'passwords.txt'} 中每位学生自己的那一行发给学生。按 Ctrl-C 停止。", sep="\n"),
          flush=True)
    cmd, env = hub_command(config)
    os.chdir(config.parent)
    os.execve(cmd[0], cmd, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
