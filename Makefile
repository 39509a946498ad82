# Set-up and checks. `make run` and `make test` each create or reuse .venv and install what they need
# (on Debian as root, also the system libraries: PortAudio, PulseAudio for the virtual-microphone test,
# the EGL/xkb/fontconfig libraries Qt needs, Xvfb for screenshots, shellcheck for the packaging scripts' test).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)
SYSDEPS := libportaudio2 pulseaudio pulseaudio-utils libpulse0 libasound2-plugins libegl1 libgl1 libxkbcommon0 \
	libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 \
	libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0 xvfb espeak-ng sox shellcheck
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test reference lint fixtures bench sysdeps clean

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)

sysdeps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  missing=""; for p in $(SYSDEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then echo "installing system packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi; \
	fi

$(STAMP): $(VENV)/bin/python pyproject.toml
	$(MAKE) sysdeps
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/livecap $(ARGS)

# pytest-xdist workers (0: one process). Most of the suite's time is waiting (audio in real time, a private sound
# server, a stalled hub's time-outs): one process kept 2 cores ~65 % busy for 10 min, two finish in ~5.5.
JOBS ?= 2

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(VPY) -m pytest -q -n $(JOBS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

reference: $(STAMP)
	$(VPY) -m pip install -q -e '.[reference]'
	$(VPY) -m pytest -q -p no:cacheprovider tests/reference -o addopts="-ra"

fixtures: $(STAMP)
	$(VPY) -m pip install -q -e '.[reference]'
	$(VPY) tests/fixtures/make_fixtures.py

clean:
	rm -rf $(VENV) build dist *.egg-info

# `make package`: a PyInstaller bundle for this platform (Linux: dist/livecap/; macOS: dist/livecap.app and a
# .dmg, signed and notarized when configured), then the bundle's --self-test from a copy outside the repository.
# Slow, so not part of `make test`; `make package-check` repeats only the check. See packaging/README.md.
.PHONY: package package-check
PACKAGE_STAMP := $(VENV)/.package-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

$(PACKAGE_STAMP): $(STAMP)
	$(VPY) -m pip install -q -e '.[package]'
	rm -f $(VENV)/.package-*; touch $@

package: $(PACKAGE_STAMP)
	$(VPY) packaging/build.py

package-check: $(PACKAGE_STAMP)
	$(VPY) packaging/build.py --check
