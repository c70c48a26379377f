# The two commands a fresh machine needs are `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JS := tests/clients/kafkajs
JS_STAMP := $(JS)/node_modules/.installed

.PHONY: run test lint bench bench-smoke clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,pipeline]'
	touch $(STAMP)

# KafkaJS for its compatibility tests; npm comes with install-system-deps
$(JS_STAMP): $(JS)/package-lock.json
	npm ci --prefix $(JS) --no-audit --no-fund --loglevel=error
	touch $(JS_STAMP)

run: $(STAMP)
	$(BIN)/odradek up

# --max-worker-restart=0: a crashed worker ends the run naming its test; replacing it can
# hang pytest-xdist 3.8 under --dist loadfile until CI's time runs out
test: $(STAMP)
	./scripts/install-system-deps
	$(MAKE) --no-print-directory $(JS_STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --max-worker-restart=0

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

bench: $(STAMP)
	./scripts/install-system-deps
	$(BIN)/python bench/run.py

bench-smoke: $(STAMP)
	$(BIN)/python bench/run.py --quick --brokers odradek

clean:
	rm -rf $(VENV) build *.egg-info
