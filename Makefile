# distlearn: two commands do all set-up on a fresh machine with Python 3.10+ and make.
#   make lab    create .venv, install, open JupyterLab on the course
#               (a classroom server: make lab LAB_ARGS="--no-browser --ip=0.0.0.0"; see docs/teaching.md)
#   make test   create or reuse .venv, install, run the tests (< 10 min; the longer ones: make test-extended)
#   make site   the course as a static website, English and Chinese, in build/site/: open build/site/index.html
#               (search without snippets) or serve it, `python -m http.server -d build/site` (search with snippets)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.distlearn-installed
# Where the CPU-only torch wheel comes from when no local copy is found (Linux; macOS wheels on PyPI are CPU-only).
TORCH_INDEX ?= $(if $(filter Darwin,$(shell uname -s)),,https://download.pytorch.org/whl/cpu)
PORT ?= 8888
# The course in one language: `make lab COURSE_LANG=zh` (or en) opens the stored monolingual copy courses/<lang>/,
# executed in that language, copied to build/course-<lang>/ (executed there only if the stored copy is not current). Not LANG: that is the locale variable every shell already sets (en_US.UTF-8 …); make would
# take it from the environment and export a changed value to every command it runs.
COURSE_LANG ?=
LAB_ARGS ?=
# JupyterLab settings every user of .venv gets (no "would you like news?" pop-up on first open), as on Binder.
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

.PHONY: all setup site-setup site book lab lab-refresh classroom test-binder split audit-lang test test-classroom test-extended test-languages test-fast mutants bench screenshot notebooks check exercises parity nbgrader clean help
all: help
help:
	@echo "make lab [COURSE_LANG=zh|en] [LAB_ARGS='--no-browser --ip=0.0.0.0'] - set up .venv and open the course in JupyterLab (COURSE_LANG: in one language)"
	@echo "make lab PORT=8890 - JupyterLab on another port (default 8888; a --port in LAB_ARGS wins)"
	@echo "make lab-refresh [COURSE_LANG=zh|en] - bring a newer course into your copy (build/course*/), keeping your edits"
	@echo "make classroom STUDENTS=students.txt [CLASSROOM_PORT=8000] [CLASSROOM_ARGS='--memory-gib 3 --max-ranks 8'] - JupyterHub for a class on this machine: one server and one copy of the course per student (docs/teaching.md)"
	@echo "make test  - set up .venv and run every test but those of test-extended, test-classroom and test-languages (under 10 min on 2 cores)"
	@echo "make test-extended - the tests kept out of make test for their time: every chapter's explorers in JupyterLab and Chromium, the website and its search, every live explorer on it, the book (about 45 min on 2 cores the first time; CI runs it)"
	@echo "make test-classroom - three students at once in a real JupyterHub and Chromium, each isolated (about 3 min; CI runs it)"
	@echo "make test-binder - build binder/ as Binder does in a fresh venv under /tmp, time it, size it, run chapter 01 (downloads)"
	@echo "make notebooks [NAMES='06_zero_fsdp ...'] - sync each .md with its .ipynb, re-execute what changed, rebuild exercises and courses/{en,zh}/"
	@echo "make check - are the .md sources, stored notebooks, exercises and courses/{en,zh}/ copies in sync and fully executed?"
	@echo "make site [SITE_SOLUTIONS=0] - build the course website (English and Chinese) into build/site/"
	@echo "make book - the course as a book: build/book/distlearn-en.pdf and distlearn-zh.pdf (Chromium; Chinese: apt-get install fonts-noto-cjk)"
	@echo "make mutants - mutation test of the simulation modules (about 10 min): kill rate and every survivor"
	@echo "make bench - run the speed benchmarks (pytest-benchmark), fail on a missed goal, rewrite benchmarks/README.md"
	@echo "make screenshot [SCREENSHOT_NOTEBOOK=notebooks/NN_x.ipynb] - refresh docs/img/explorer.png in a real browser"

setup: $(STAMP) $(LAB_OVERRIDES)

$(LAB_OVERRIDES): jupyter-settings/overrides.json $(STAMP)
	@mkdir -p $(dir $@)
	@cp jupyter-settings/overrides.json $@

# Byte-code: pip and uv install without it (--no-compile; uv's default) and $(COMPILE) compiles the whole venv
# once at the end, on every core (~30 s here). Without .pyc files every new Python process (a kernel, a test
# worker, each rank of a lab) compiles what it imports again whenever PYTHONDONTWRITEBYTECODE is set, as on this
# machine: importing torch and torch.distributed took 4.4 s of CPU instead of 1.5 s.
PIP := $(PY) -m pip install -q --no-compile --disable-pip-version-check
# The packages' own test folders and pip (used only while installing) are left out: 19 s -> 15 s here.
COMPILE = $(PY) -m compileall -q -j 0 -x '/(tests?|pip)/' "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
  >/dev/null 2>&1 || true  # a few files of the packages are templates, not Python: compileall reports them
# The dependencies go in with uv (a pip-compatible installer from PyPI, pinned in constraints.txt: 41 s → 6 s of
# set-up here) when uv installs and succeeds, else with pip; PIP_ONLY=1 uses pip alone. $(1): what to install.
PIP_ONLY ?=
comma := ,
install = $(if $(filter 1,$(PIP_ONLY)),$(PIP) -c constraints.txt -e '$(1)',\
  { $(PIP) -c constraints.txt uv >/dev/null 2>&1 && $(VENV)/bin/uv pip install -q --python $(PY) -c constraints.txt -e '$(1)'; } \
  || $(PIP) -c constraints.txt -e '$(1)')
$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "distlearn needs Python 3.10+ / 需要 Python 3.10 或更新版本")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing torch 2.13.0 (CPU build) / 安装 torch 2.13.0（CPU 版）..."
	@$(PIP) --no-index --no-deps torch==2.13.0 2>/dev/null \
	  || $(PIP) --no-deps torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	@echo "Installing distlearn and its dependencies / 安装 distlearn 及其依赖..."
	@$(call install,.[$(STAMP_EXTRAS)])
	@echo "Compiling the installed packages to byte-code / 将已安装的包编译为字节码..."
	@$(COMPILE)
	@touch $(STAMP) $(if $(findstring site,$(STAMP_EXTRAS)),$(SITE_STAMP)) $(if $(findstring teach,$(STAMP_EXTRAS)),$(TEACH_STAMP)) \
	  $(if $(findstring classroom,$(STAMP_EXTRAS)),$(CLASSROOM_STAMP))

# The website (authoring/website.py, website/conf.py): Sphinx + MyST-NB read the stored notebooks, nothing is run.
# Its tools are the optional extra .[site], installed on first use (by `make site` or `make test`, which builds part
# of the site in tests/test_website.py), so that `make setup` and `make lab` stay small.
# SITE_SOLUTIONS=0 leaves the solution pages out (links to them become plain text); SITE_ARGS e.g. "--chapters 05_pipeline_parallel".
SITE_STAMP := $(VENV)/.distlearn-site-installed
SITE_SOLUTIONS ?= 1
SITE_ARGS ?=
site-setup: $(SITE_STAMP)

# A goal that needs the website tools (make test, make site) installs them with the rest, in one install and one
# byte-compile (two took 38 s of a fresh set-up, one 33 s); the recipe below then finds its stamp already there.
STAMP_EXTRAS := test$(if $(filter test site site-setup book,$(MAKECMDGOALS)),$(comma)site)$(if $(filter test,$(MAKECMDGOALS)),$(comma)teach$(comma)classroom)
$(SITE_STAMP): $(STAMP)
	@if [ ! -f $@ ] || [ $(STAMP) -nt $@ ]; then \
	  echo "Installing the website tools (Sphinx, MyST-NB) / 安装网站构建工具（Sphinx、MyST-NB）..."; \
	  $(call install,.[test$(comma)site]) || exit 1; $(COMPILE); touch $@; fi

# make test also runs a whole nbgrader round (tests/test_teaching.py): the .[teach] extra, installed with the rest
# on a fresh set-up, or here when .venv was set up by make lab / make site first.
TEACH_STAMP := $(VENV)/.distlearn-teach-installed
$(TEACH_STAMP): $(SITE_STAMP)
	@if [ ! -f $@ ] || [ $(STAMP) -nt $@ ]; then \
	  echo "Installing nbgrader for the grading test / 安装 nbgrader（批改测试用）..."; \
	  $(call install,.[test$(comma)site$(comma)teach]) || exit 1; $(COMPILE); touch $@; fi

# make classroom and the classroom test (tests/test_classroom.py, make test-classroom): JupyterHub and its Python
# proxy, the .[classroom] extra, installed with the rest on a fresh set-up of make test, or here on first use.
CLASSROOM_STAMP := $(VENV)/.distlearn-classroom-installed
$(CLASSROOM_STAMP): $(STAMP)
	@if [ ! -f $@ ] || [ $(STAMP) -nt $@ ]; then \
	  echo "Installing JupyterHub for the classroom / 安装 JupyterHub（课堂用）..."; \
	  $(call install,.[test$(if $(wildcard $(SITE_STAMP)),$(comma)site)$(if $(wildcard $(TEACH_STAMP)),$(comma)teach)$(comma)classroom]) || exit 1; $(COMPILE); touch $@; fi

# A classroom on this machine (authoring/classroom.py, docs/teaching.md): STUDENTS is a file, `name [en|zh|both]` a
# line; the hub listens on every interface, port CLASSROOM_PORT; CLASSROOM_ARGS: --memory-gib, --cpus, --max-ranks,
# --lab-slots, --nice, --ip, --dir (default build/classroom/: homes, passwords.txt, the hub's database).
STUDENTS ?= students.txt
CLASSROOM_PORT ?= 8000
CLASSROOM_ARGS ?=
classroom: $(CLASSROOM_STAMP) $(LAB_OVERRIDES)
	$(PY) -m authoring.classroom start --students '$(STUDENTS)' --port $(CLASSROOM_PORT) $(CLASSROOM_ARGS)

site: $(SITE_STAMP)
	$(PY) -m authoring.website build $(if $(filter 0 no false,$(SITE_SOLUTIONS)),--no-solutions) $(SITE_ARGS)

# The course as a book (authoring/book.py): the site's chapter pages, printed by headless Chromium to one PDF per
# language in build/book/ (the Chinese one needs a CJK font: Debian's fonts-noto-cjk).
book: $(SITE_STAMP)
	$(PY) -m authoring.book build

lab: $(STAMP) $(LAB_OVERRIDES)
	$(PY) -m authoring.course lab --lang '$(or $(strip $(COURSE_LANG)),both)' --port $(PORT) --lab-args='$(LAB_ARGS)'

# Your copy (build/course/, build/course-<lang>/) brought up to date with the course, your edits kept: cells you did
# not edit take the course's version, cells you edited stay yours (changed in the course too: its new version is
# inserted after yours, marked), new cells and notebooks appear (authoring/refresh.py). Close JupyterLab first.
lab-refresh: $(STAMP)
	$(PY) -m authoring.course refresh --lang '$(or $(strip $(COURSE_LANG)),both)'

# Binder's build, as repo2docker does it (binder/runtime.txt's Python, pip install -r binder/requirements.txt,
# binder/postBuild) in a fresh venv under /tmp, measured (time, size) and tried (chapter 01, JupyterLab's Chinese
# language pack): tests/binder_build.py. Not part of make test: it downloads torch (~190 MB) and the rest, minutes.
# BINDER_ARGS e.g. "--torch-from /opt/wheels" (no download.pytorch.org here), "--ref HEAD~5", "--json out.json".
BINDER_ARGS ?=
test-binder:
	$(PYTHON) tests/binder_build.py $(BINDER_ARGS)

# Monolingual copies of the course, executed in that language: build/course-zh/ (COURSE_LANG=en: build/course-en/).
split: $(STAMP)
	$(PY) -m authoring.course split --lang '$(or $(strip $(COURSE_LANG)),zh)'

# Every printed line, plot text and widget label readable in one language (COURSE_LANG=zh or en; default both).
audit-lang: $(STAMP)
	$(if $(strip $(COURSE_LANG)),$(PY) -m authoring.course audit-lang --lang '$(COURSE_LANG)' $(NAMES),\
	  $(PY) -m authoring.course audit-lang --lang zh $(NAMES) && $(PY) -m authoring.course audit-lang --lang en $(NAMES))

# Extra pytest options, e.g. make test PYTEST_ARGS="--durations=25". TEST_JOBS: how many pytest processes share the
# tests (pytest-xdist; --dist loadscope keeps each notebook's cells, and each test module with its fixtures, in one
# process, in order); TEST_JOBS=0 runs them all in this one process.
# distlearn is compiled to byte-code first, as Python does itself unless PYTHONDONTWRITEBYTECODE is set (then every
# kernel, rank and worker of the run would compile what it imports of it again: ~0.1 s of CPU each, ~300 of them).
# pytest keeps its assertion-rewritten test modules in __pycache__ as well, but only where Python may write
# byte-code: with PYTHONDONTWRITEBYTECODE set, every pytest process of the run (2 workers, the test runs started by
# tests) rewrote every test module again, ~3 s of CPU each. make test writes byte-code anyway, so pytest may too.
PYTEST_ARGS ?=
TEST_JOBS ?= 2
test: $(STAMP) $(SITE_STAMP) $(TEACH_STAMP) $(CLASSROOM_STAMP) $(LAB_OVERRIDES)
	@$(PY) -m compileall -q distlearn tests benchmarks >/dev/null
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -p no:cacheprovider tests notebooks solutions -m "not course_languages and not classroom and not extended" \
	  $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadscope) \
	  --nbval --nbval-current-env --nbval-cell-timeout=300 --nbval-sanitize-with tests/nbval_sanitize.cfg \
	  --durations=25 $(PYTEST_ARGS)

# Three students at once in a real JupyterHub, each in headless Chromium, each isolated (tests/test_classroom.py;
# about 3 min on 2 busy cores, so not part of make test; .ci/run runs it after make test).
test-classroom: $(CLASSROOM_STAMP) $(LAB_OVERRIDES)
	$(PY) -m pytest -p no:cacheprovider tests/test_classroom.py $(PYTEST_ARGS)

# The tests kept out of make test's 10 minutes for their time (pytest marker `extended`); .ci/run runs them after it:
# every chapter's explorers in JupyterLab and Chromium but the two make test opens (tests/test_browser.py, ~2.5 min),
# the website of two chapters read in Chromium (tests/test_website.py, ~1 min), three chapters on a phone and a
# desktop (tests/test_site_layout.py, ~2 min), the whole site's search
# (tests/test_site_search.py), every live explorer moved through every setting on the whole site
# (tests/test_web_explorers.py: ~20 min the first time, its renders then cached in build/web-explorers-cache/), the
# PDF book (tests/test_book.py, ~5 min), PyTorch's flex-attention context parallelism (torch.compile) and the
# checkers' real 20 s limit. About 45 min on 2 cores the first time.
test-extended: $(STAMP) $(SITE_STAMP) $(LAB_OVERRIDES)
	$(PY) -m pytest -p no:cacheprovider tests -m extended $(PYTEST_ARGS)

# The whole course executed once per language, every printed line, plot text and widget label checked for a reader
# of that language alone (tests/test_language_outputs.py; about 15 min on 2 cores, so not part of make test, which
# checks the same rule on the stored copies courses/en/ and courses/zh/ without running them)
test-languages: $(STAMP) $(LAB_OVERRIDES)
	$(PY) -m pytest -p no:cacheprovider tests/test_language_outputs.py -m course_languages $(PYTEST_ARGS)

test-fast: $(STAMP) $(LAB_OVERRIDES)
	$(PY) -m pytest -p no:cacheprovider tests -m "not slow"

# Speed goals with pytest-benchmark (benchmarks/bench_*.py): every goal is asserted, a goal missed fails make bench;
# then benchmarks/README.md is rewritten from pytest-benchmark's JSON. BENCH_ARGS: --with-make-test, --full-grid, -k ...
# Mutation test of the simulation and calculator modules (authoring/mutants.py, list in authoring/mutants.toml):
# prints the kill rate and every survivor; fails below 97 %. About 10 min on 2 cores. MUTANTS_ARGS: --only, --jobs.
MUTANTS_ARGS ?=
mutants: $(STAMP)
	$(PY) -m authoring.mutants $(MUTANTS_ARGS)

BENCH_ARGS ?=
bench: $(STAMP)
	@$(PY) -m pytest -p no:cacheprovider benchmarks -o python_files='bench_*.py' \
	  --benchmark-json=benchmarks/.last-run.json --benchmark-columns=median,min,max,rounds --benchmark-sort=fullname \
	  $(BENCH_ARGS); status=$$?; \
	  $(PY) -m benchmarks.report benchmarks/.last-run.json || status=1; exit $$status

# Needs Chromium (apt-get install chromium). Default: the first chapter notebook with an explorer.
SCREENSHOT_NOTEBOOK ?=
screenshot: $(STAMP) $(LAB_OVERRIDES)
	$(PY) tests/browser_harness.py --screenshot docs/img/explorer.png $(SCREENSHOT_NOTEBOOK)

# Sync every notebooks/ and solutions/ .md with its .ipynb (whichever was edited last wins), re-execute only the
# notebooks whose code changed (plus NAMES), rebuild exercises/, then the monolingual copies courses/en/ and
# courses/zh/ (the copies of what was re-executed are re-executed in their language). A prose-only fix executes nothing.
NAMES ?=
# COPIES_ONLY=1: re-execute only the copies courses/<lang>/ of NAMES (the notebooks themselves are current).
COPIES_ONLY ?=
notebooks: $(STAMP)
	$(PY) -m authoring.course notebooks $(if $(filter 1 yes true,$(COPIES_ONLY)),--copies-only) $(NAMES)

check: $(STAMP)
	$(PY) -m authoring.course check

exercises: $(STAMP)
	$(PY) -m authoring.course build-exercises

parity: $(STAMP)
	$(PY) -m authoring.course parity

clean:
	rm -rf $(VENV) build .pytest_cache
