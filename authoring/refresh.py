"""Refresh a learner's copy of the course (``build/course/``, ``build/course-<lang>/``) from a newer course without
losing anything the learner typed: ``make lab-refresh`` (``python -m authoring.course refresh``).

What a copy was made from is stored beside it, in ``<copy>/.distlearn-base.json`` (a hidden file JupyterLab does not
list): for every notebook, the SHA-256 of each cell's source by cell id, as the course had it when the copy was made
or last refreshed. A cell is *edited by the learner* when its source no longer has that hash, *changed by the course*
when the new course's source no longer has it. Per notebook, cell by cell (cells are matched by their id):

1. and 2. not edited by the learner: the course's cell (source, stored outputs, tags) replaces it, whether the
   course changed it or not (outputs of the learner's own runs of such a cell are replaced by the course's);
3. edited by the learner only: the learner's cell is kept;
4. edited by the learner **and** changed by the course: the learner's cell is kept, and the course's new version is
   inserted right after it, its first line marking it, in both languages (in the copy's language for a
   one-language copy), as the course's new version of the cell above; tag ``course-update``. A code cell's new
   version is inserted as a markdown cell showing the code (shown, not run: Run All must not replace the learner's
   answer with the course's unanswered one). Nothing is merged inside a cell;
5. a cell the course added appears at its place (after the course cell it follows); a cell the course removed goes,
   unless the learner edited it (then it stays);
6. cells the learner added stay, after the cell they followed (after its new version if rule 4 just inserted
   one; a new version inserted by an earlier refresh is the learner's cell now); a cell the learner deleted stays
   deleted, even if the course changed it;
7. a notebook new in the course (or missing from the copy) is copied in; notebooks the course removed and files
   the learner made are left alone.

A copy made before this file existed has no record: a cell whose source equals the new course's counts as unedited,
any other as edited (rule 3 or 4): nothing is lost, some unchanged cells may get a marked new version. Running the
refresh again with no new course changes nothing (the record then holds the course's hashes; a new version already
inserted, recognised by its id, is not inserted twice). Notebooks are read and written with nbformat (version 4,
cells with ids, nbformat ≥ 4.5).
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

BASE_FILE = ".distlearn-base.json"
UPDATE_TAG = "course-update"
NB_VERSION = 4
_MARK = {  # the first line of a course's new version inserted after the learner's edited cell (rule 4)
    "en": "The course's new version of the cell above (your version, above, is kept unchanged)",
    "zh": "课程对上面这个单元格的新版本（上面是你的版本，原样保留）",
}


def source_hash(source) -> str:
    """SHA-256 (hex) of a cell's source, a string or nbformat's list of lines."""
    text = "".join(source) if isinstance(source, list) else source
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def notebook_record(nb) -> dict[str, str]:
    """``{cell id: source_hash}`` for every cell of ``nb`` (cells without an id are left out)."""
    return {c["id"]: source_hash(c.source) for c in nb.cells if c.get("id")}


def _mark(lang: str) -> str:
    return " / ".join(_MARK[k] for k in ("en", "zh")) if lang not in _MARK else _MARK[lang]


_NOT_RUN = {  # a code cell's new version is shown, never run: running it would replace the learner's answer above
    "en": "shown, not run: copy what you want from it into your cell above",
    "zh": "只展示、不运行：需要的部分请复制到上面你的单元格里",
}


def _new_version_cell(cell, lang: str):
    """The course's new version of ``cell``, to insert after the learner's edited one: a new id, tag
    ``course-update`` and a first line saying what it is. A code cell's new version is a *markdown* cell showing
    the code in a fenced block: as a code cell, Run All would run it after the learner's answer and replace it (a
    new user's refreshed exercise failed again with "not answered")."""
    d = json.loads(json.dumps(cell))
    mark = _mark(lang)
    if cell.cell_type == "code":
        not_run = " / ".join(_NOT_RUN[k] for k in ("en", "zh")) if lang not in _NOT_RUN else _NOT_RUN[lang]
        text = "".join(cell.source) if isinstance(cell.source, list) else cell.source
        new = nbformat.v4.new_markdown_cell(f"> **{mark}** ({not_run})\n\n```python\n{text}\n```",
                                            metadata={"tags": list(d.get("metadata", {}).get("tags", []))})
    else:
        new = nbformat.from_dict(d)
        new.source = f"> **{mark}**\n\n" + cell.source
    new["id"] = f"{cell['id'][:40]}-new-{source_hash(cell.source)[:8]}"
    tags = list(new.metadata.get("tags", []))
    new.metadata["tags"] = tags + [UPDATE_TAG] if UPDATE_TAG not in tags else tags
    return new


@dataclass
class Merge:
    """What :func:`merge_notebook` did, in cell ids per rule."""
    updated: list[str] = field(default_factory=list)     # rule 2
    kept: list[str] = field(default_factory=list)        # rule 3
    conflicts: list[str] = field(default_factory=list)   # rule 4: learner's kept, course's inserted after
    added: list[str] = field(default_factory=list)       # rule 5: new course cells
    removed: list[str] = field(default_factory=list)     # rule 5: course removed, learner had not edited
    own: list[str] = field(default_factory=list)         # rule 5/6: learner's own cells, or edited cells the course removed


def merge_notebook(mine, course, base: dict[str, str] | None, lang: str = "both"):
    """The learner's notebook ``mine`` refreshed from ``course`` given ``base`` (:func:`notebook_record` of what
    ``mine`` was made from; ``None``: unknown). Returns ``(notebook, Merge)``; ``mine`` and ``course`` are not
    changed. The rules are the module's; ``lang`` (``"en"``, ``"zh"``, ``"both"``) is the language of rule 4's mark."""
    mine_by_id = {c["id"]: c for c in mine.cells if c.get("id")}
    report = Merge()
    out, just_inserted = [], set()
    for new in course.cells:
        cid, new_hash = new["id"], source_hash(new.source)
        have = mine_by_id.get(cid)
        if have is None:
            if base is not None and cid in base:
                continue                                 # rule 6: the learner deleted it
            out.append(new)                              # rule 5: a cell the course added
            report.added.append(cid)
            continue
        have_hash = source_hash(have.source)
        if base is None or cid not in base:              # no record: edited = differs from the new course
            learner_edit = course_change = have_hash != new_hash
        else:
            learner_edit, course_change = have_hash != base[cid], new_hash != base[cid]
        if not learner_edit:                             # rules 1 and 2: the course's cell
            out.append(new)
            if course_change:
                report.updated.append(cid)
        elif not course_change:                          # rule 3
            out.append(have)
            report.kept.append(cid)
        else:                                            # rule 4
            out.append(have)
            inserted = _new_version_cell(new, lang)
            report.conflicts.append(cid)
            if inserted["id"] not in mine_by_id:         # not inserted by an earlier refresh already
                out.append(inserted)
                just_inserted.add(inserted["id"])
    placed = {c["id"] for c in out}
    # the learner's cells not placed yet: their own cells, and cells the course removed
    previous = None
    for cell in mine.cells:
        cid = cell.get("id")
        if cid in placed:
            previous = cid
            continue
        if base is not None and cid in base and source_hash(cell.source) == base[cid]:
            report.removed.append(cid)                   # rule 5: removed by the course, not edited
            continue
        at = 0 if previous is None else next(i for i, c in enumerate(out) if c.get("id") == previous) + 1
        if at < len(out) and out[at]["id"] in just_inserted:
            at += 1                                      # the course's new version stays right after the edited cell
        out.insert(at, cell)                             # rules 5 and 6: kept after the cell it followed
        placed.add(cid)
        previous = cid
        report.own.append(cid)
    merged = nbformat.from_dict(json.loads(json.dumps(mine)))
    merged.cells = [nbformat.from_dict(json.loads(json.dumps(c))) for c in out]
    merged.metadata = nbformat.from_dict({**json.loads(json.dumps(mine.metadata)),
                                          **json.loads(json.dumps(course.metadata))})
    return merged, report


def _read_base(copy_root: Path) -> dict:
    path = Path(copy_root) / BASE_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def record_copy(copy_root: Path, sources: dict[str, Path]) -> None:
    """Write ``<copy_root>/.distlearn-base.json`` for a copy just made from ``sources`` (relative path in the copy
    → the course notebook it was copied from)."""
    base = {rel: notebook_record(nbformat.read(src, as_version=NB_VERSION)) for rel, src in sorted(sources.items())}
    Path(copy_root).mkdir(parents=True, exist_ok=True)
    (Path(copy_root) / BASE_FILE).write_text(json.dumps(base, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def copy_is_behind(copy_root: Path, sources: dict[str, Path]) -> bool | None:
    """Whether the course ``sources`` has a notebook or a cell source that the copy's record does not (a refresh
    would bring something in); ``None`` when the copy has no record."""
    if not (Path(copy_root) / BASE_FILE).exists():
        return None
    base = _read_base(copy_root)
    return any(not (Path(copy_root) / rel).exists() or base.get(rel) != notebook_record(
        nbformat.read(src, as_version=NB_VERSION)) for rel, src in sources.items())


def refresh_copy(copy_root: Path, sources: dict[str, Path], lang: str = "both", log=print) -> dict[str, Merge]:
    """Refresh the learner's copy ``copy_root`` from ``sources`` (relative path in the copy → the newer course's
    notebook) by the module's rules, then record the course's hashes. Returns a :class:`Merge` per notebook
    changed or copied in. Writes only notebooks whose cells change."""
    from distlearn.core.i18n import bi

    copy_root = Path(copy_root)
    base_all = _read_base(copy_root)
    had_record = (copy_root / BASE_FILE).exists()
    done = {}
    for rel, src in sorted(sources.items()):
        course = nbformat.read(src, as_version=NB_VERSION)
        target = copy_root / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, target)
            done[rel] = Merge(added=[c["id"] for c in course.cells])
            log(bi(f"{rel}: new, copied in", f"{rel}：新笔记本，已复制"))
            continue
        mine = nbformat.read(target, as_version=NB_VERSION)
        base = base_all.get(rel) if had_record else None
        merged, report = merge_notebook(mine, course, base, lang)
        if nbformat.writes(merged) != nbformat.writes(mine):
            nbformat.write(merged, target)
            done[rel] = report
            log(bi(f"{rel}: {len(report.updated)} cell(s) updated, {len(report.added)} added, "
                   f"{len(report.removed)} removed; your edits kept: {len(report.kept) + len(report.conflicts)}"
                   + (f", {len(report.conflicts)} with the course's new version inserted after yours"
                      if report.conflicts else ""),
                   f"{rel}：更新 {len(report.updated)} 个单元格，新增 {len(report.added)} 个，删除 "
                   f"{len(report.removed)} 个；保留你修改过的 {len(report.kept) + len(report.conflicts)} 个"
                   + (f"，其中 {len(report.conflicts)} 个的后面插入了课程的新版本" if report.conflicts else "")))
    record_copy(copy_root, sources)
    return done
