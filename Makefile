# Pluto: `make demo` runs the main mission on the simulated robot, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench clean

# .[dev] is Pluto with every extra (web, foxglove, tui, gps, can, xml, secure, plot) and the test tools, at the
# versions of constraints.txt, the ones every test passed with.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	# The numba kernels (pose, slam, arm, the simulated base), compiled once into numba's cache now rather than by
	# the first module to need them (up to a minute on a busy machine, while its starter waits).
	$(BIN)/pluto warm
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pluto demo

# Six workers on two cores: most tests wait on the bus or on processes (four workers kept the cores about 60 % busy).
# The slow tests run after, alone: one of them starves the machine on purpose, which must not starve the tests beside
# it.
# Byte code is written (whatever PYTHONDONTWRITEBYTECODE says): every worker and every `pluto` process a test starts
# would otherwise compile the sources, and pytest rewrite the tests' asserts, again (11 s of collection a worker).
# One collection first writes it all once (3 s when it is there already), rather than six workers at once doing the
# same work side by side on a fresh clone.
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q --collect-only -p no:cacheprovider >/dev/null || true
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n 6 --dist worksteal -m "not slow"
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench]'
	$(BIN)/python bench/bus.py
	$(BIN)/python bench/sim_raycast.py
	$(BIN)/python bench/sim_rtf.py
	$(BIN)/python bench/localization.py
	$(BIN)/python bench/lines.py
	$(BIN)/python bench/pose.py
	$(BIN)/python bench/slam.py
	$(BIN)/python bench/movement.py
	$(BIN)/python bench/motion.py
	$(BIN)/python bench/ik.py
	$(BIN)/python bench/xmlserver.py
	$(BIN)/python bench/player.py
	$(BIN)/python bench/record.py
	$(BIN)/python bench/drivers.py
	$(BIN)/python bench/web.py
	$(BIN)/python bench/faults.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
