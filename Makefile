# Two commands for a newcomer: `make run` (the bot) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test lint bench console clean mutate messages deps

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[test]"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/python -m bot

console: $(STAMP)
	$(VENV)/bin/python -m bot console

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/mypy
	$(MAKE) --no-print-directory deps
	$(VENV)/bin/python -m pytest -q

# Declared dependencies match the imports ([tool.deptry] in pyproject.toml): the shipped
# code needs nothing from the test extra, then the tests need nothing undeclared. deptry
# (the `deps` extra) is installed beside .venv, on PYTHONPATH for these commands only.
DEPTRY := $(VENV)/deptry
DEPS_EXTRA := import tomllib; project = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	print(*project["optional-dependencies"]["deps"])
$(DEPTRY)/.installed: $(STAMP)
	$(VENV)/bin/pip install --quiet --upgrade --target $(DEPTRY) \
		$$($(VENV)/bin/python -c '$(DEPS_EXTRA)')
	touch $@

deps: $(DEPTRY)/.installed
	PYTHONPATH=$(DEPTRY) $(VENV)/bin/python -m deptry .
	PYTHONPATH=$(DEPTRY) $(VENV)/bin/python -m deptry . \
		--exclude '\.venv|\.git|mutants|build|docs' --optional-dependencies-dev-groups mutate,deps

# Mutation testing (docs/mutation-testing.md); e.g. `make mutate MUTANTS='core.prompting.rounds.*'`.
# mutmut lives in its own environment: installed into .venv it brings click, which the
# suite's start-up import checks would then find.
MUTANTS ?=
MUTATE_VENV := .venv-mutate
MUTATE_STAMP := $(MUTATE_VENV)/.installed

$(MUTATE_STAMP): pyproject.toml
	test -x $(MUTATE_VENV)/bin/python || $(PYTHON) -m venv $(MUTATE_VENV)
	$(MUTATE_VENV)/bin/pip install --quiet --upgrade pip
	$(MUTATE_VENV)/bin/pip install --quiet -e ".[test,mutate]"
	touch $(MUTATE_STAMP)

mutate: $(MUTATE_STAMP)
	$(MUTATE_VENV)/bin/mutmut run --max-children $${MUTATE_JOBS:-2} $(MUTANTS)
	$(MUTATE_VENV)/bin/mutmut results
	$(MUTATE_VENV)/bin/mutmut export-cicd-stats

# Interface strings (docs/languages.md): extract i18n/messages.py into the template, merge
# it into every language's catalog and compile each catalog to the .mo the bot reads.
messages: $(STAMP)
	$(VENV)/bin/pybabel extract -F babel.cfg --no-location --project consultation-bot \
		-o i18n/locales/messages.pot .
	$(VENV)/bin/pybabel update -D messages -i i18n/locales/messages.pot -d i18n/locales \
		--ignore-obsolete
	$(VENV)/bin/python -m i18n.catalogs

bench: $(STAMP)
	$(VENV)/bin/python -m bench

clean:
	rm -rf $(VENV) $(MUTATE_VENV) .pytest_cache
