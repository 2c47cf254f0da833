# fidosim: `make run` starts a virtual key, `make test` runs every test. Both install what is missing.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SWIFT ?= $(shell command -v swift || echo /opt/swift/usr/bin/swift)
PYTHON ?= python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN := .build/debug/fidosim
# The Python package (tools/python) is installed into a fresh venv that sees the system's packages (python-fido2,
# pytest); the interop suite, the device suite and the VM run use its interpreter.
VENV := $(CURDIR)/.build/venv
VENV_PY := $(VENV)/bin/python
SERVE_ARGS ?=

# Debian packages the tests need, as command:package pairs (installed only when the command is missing).
# umockdev-run brings the preload library of the private key (fidosim run), libumockdev0 comes with it.
DEB_COMMANDS := umockdev-run:umockdev fido2-token:fido2-tools python3:python3 pip3:python3-pip tshark:tshark setpriv:util-linux strace:strace \
	Xvfb:xvfb dunst:dunst notify-send:libnotify-bin busctl:systemd gdbus:libglib2.0-bin dbus-daemon:dbus-daemon \
	systemd-analyze:systemd pcscd:pcscd pcsc_scan:pcsc-tools opensc-tool:opensc swig:swig usbip:usbip
# Files whose package the tests need, as path:package pairs (the vpcd reader driver for the PC/SC card tests).
DEB_FILES := /usr/lib/pcsc/drivers/serial/libifdvpcd.so:vsmartcard-vpcd
# Libraries the build links (hidapi for FIDOClient's HID transport, OpenSSL's libcrypto for its verification), as
# pkg-config-name:package pairs.
DEB_LIBS := hidapi-hidraw:libhidapi-dev libcrypto:libssl-dev libpcsclite:libpcsclite-dev
# PyPI packages for the interop tests, as module=requirement (installed only when the import fails).
# pyscard (python-fido2's PC/SC device) builds with swig against libpcsclite-dev.
# ruff lints the Python (make format-lint; its rules are in pyproject.toml).
PY_MODULES := 'fido2=fido2>=2.2,<3' 'pytest=pytest' 'selenium=selenium' 'smartcard=pyscard' 'ruff=ruff'

.PHONY: help deps venv architecture-map host-e2e browser-examples browser-examples-deps test-stages python-package-test install build release run test format-lint format unit-test unit-test-and-fuzz-smoke interop device-suite e2e e2e-auto e2e-deps install-udev install-user-unit flash-proof flash-bench fuzz fuzz-smoke bench profile-roundtrip flood-figures key-cost soak clean

help:
	@echo "make run        build and start a virtual key (UDP on 127.0.0.1:8111 in this build)"
	@echo "make test       install what is missing, build, run fuzz smoke tests, the Swift tests, the python-fido2"
	@echo "                interop suite and (when its tools can be installed) the VM end-to-end run; E2E=skip skips it"
	@echo "make format-lint  swift format lint --strict (the house style, .swift-format) and ruff on the Python"
	@echo "                (pyproject.toml); make format rewrites the Swift tree and applies ruff's fixes"
	@echo "make unit-test  swift test only"
	@echo "make interop    the python-fido2 interop suite against the built binary, through the fidosim Python"
	@echo "                package (tools/python) installed into a fresh venv (.build/venv)"
	@echo "make python-package-test  the package's examples from /tmp: with python-fido2, and with the standard"
	@echo "                library only"
	@echo "make browser-examples  the package's browser examples (tools/python/examples/browser): Playwright and"
	@echo "                Selenium drive Debian's Chromium through a passkey registration and sign-in against a"
	@echo "                private key, as an unprivileged user (PLAYWRIGHT_VERSION, default 1.63.0)"
	@echo "make device-suite  python-fido2's own device tests (tests/device of its source distribution) against"
	@echo "                fidosim: default, fingerprint, enterprise attestation and yubikey5 configurations"
	@echo "make e2e        the key as a uhid device in a VM, driven by fido2-tools, OpenSSH, python-fido2, browsers"
	@echo "                (E2E_REPEAT=N: every group N times in one boot, with the failures per step)"
	@echo "make install   the fidosim binary, its man page and shell completion (bash, zsh, fish) under PREFIX"
	@echo "                (default /usr/local; DESTDIR for staging; INSTALL_CONFIG=debug skips the release build)"
	@echo "make install-udev  udev rules: /dev/uhid for the fidosim group, the key's hidraw node for the logged-in user"
	@echo "make install-user-unit  the daily key as a systemd user unit (prompt mode, started at login)"
	@echo "make flash-proof   power-cut proof of the flash store; make flash-bench: its numbers"
	@echo "make soak          make test's host stages, SOAK_ROUNDS rounds (default 3) beside SOAK_LOAD busy processes"
	@echo "                   (default 2, stress-ng): every test that failed in any round"
	@echo "make bench         signatures, getAssertion and makeCredential per second against the raw ES256 rate"
	@echo "make key-cost      what a key added at run time (serve --hub) costs: memory, time, descriptors"
	@echo "make profile-roundtrip  capture each built-in profile and a quirky one, serve the capture, capture it again,"
	@echo "                   and compare both captures and both keys' whole conform reports"
	@echo "make fuzz          libFuzzer on the CBOR decoder, CTAPHID, the NFC APDU machine, the flash store, flash image"
	@echo "                   files, the authenticator,"
	@echo "                   the control parser, fidosim webdriver's HTTP readers"
	@echo "                   and the conformance client's readers of what a key sends"
	@echo "                   (FUZZ_SECONDS each, default 300; or FUZZ_RUNS executions each; FUZZ_CORPUS=DIR keeps the corpora;"
	@echo "                   FUZZ_JOBS=N runs N processes per target, which share FUZZ_RUNS;"
	@echo "                   FUZZ_TIMEOUT=S: seconds an input may run, default 10)"

deps:
	@command -v $(SWIFT) >/dev/null || { echo "swift not found: install Swift 6.3 (swift.org) and put it on PATH"; exit 1; }
	@missing=""; for pair in $(DEB_COMMANDS); do command -v $${pair%%:*} >/dev/null || missing="$$missing $${pair#*:}"; done; \
	command -v pkg-config >/dev/null || missing="$$missing pkg-config"; \
	for pair in $(DEB_LIBS); do pkg-config --exists $${pair%%:*} 2>/dev/null || missing="$$missing $${pair#*:}"; done; \
	for pair in $(DEB_FILES); do [ -e $${pair%%:*} ] || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	@for spec in $(PY_MODULES); do mod=$${spec%%=*}; req=$${spec#*=}; \
	  $(PYTHON) -c "import $$mod" 2>/dev/null || { echo "installing $$req from PyPI"; \
	    $(PYTHON) -m pip install -q "$$req" || $(PYTHON) -m pip install -q --break-system-packages "$$req"; }; \
	done

build: deps
	$(SWIFT) build --product fidosim

release: deps
	$(SWIFT) build -c release --product fidosim

# Power-cut proof of the flash store (release build): cut points, violations, wall time.
flash-proof: deps
	$(SWIFT) build -c release --product fidosim-proof
	.build/release/fidosim-proof proof --geometry nrf52840 --cut-points 10000 --seeds 3500
	.build/release/fidosim-proof proof --geometry stm32l4 --cut-points 3000 --seeds 1000

# Capacity, lifetime, mount time, getAssertion latency, write amplification (release build).
flash-bench: deps
	$(SWIFT) build -c release --product fidosim-proof
	.build/release/fidosim-proof bench

# The capture round trip: profile capture of a fidosim key, served and captured again, conform reports compared.
profile-roundtrip: venv build
	FIDOSIM_BIN=$(CURDIR)/$(BIN) $(VENV_PY) tools/profile-roundtrip/roundtrip.py

# USB/IP floods against a key also on UDP: the owner's getInfo, the key's descriptors and memory (issue 42).
flood-figures: venv build
	FIDOSIM_BIN=$(CURDIR)/$(BIN) $(VENV_PY) tools/interop/floods.py

# What a key added at run time through the hub costs: memory, time to add and remove, descriptors (KEY_COUNT keys on
# UDP and as private keys).
KEY_COUNT ?= 100
key-cost: venv build
	FIDOSIM_BIN=$(CURDIR)/$(BIN) $(VENV_PY) tools/hub/key_cost.py $(CURDIR)/$(BIN) $(KEY_COUNT)

# make test's host stages round after round beside busy processes (stress-ng from Debian, installed when missing):
# every test that failed in any round (tools/soak.sh; SOAK_ROUNDS, default 3; SOAK_LOAD busy processes, default 2).
soak: deps e2e-deps host-e2e-deps browser-examples-deps
	@command -v stress-ng >/dev/null || { $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng; }
	bash tools/soak.sh

# Throughput and latency against this machine's raw ES256 signing rate (release build).
bench: release
	.build/release/fidosim bench

# libFuzzer targets (CBOR decoder, CTAPHID machine, flash store, authenticator) under AddressSanitizer.
fuzz: deps
	FUZZ_SECONDS=$${FUZZ_SECONDS:-300} FUZZ_RUNS=$${FUZZ_RUNS:-} bash tools/fuzz/run.sh

fuzz-smoke: deps
	bash tools/fuzz/run.sh --smoke

run: build
	$(BIN) serve $(SERVE_ARGS)

# The house style (.swift-format, the toolchain's swift-format): a line over 120 columns or a rule broken fails.
FORMATTED := Sources Tests Package.swift tools/fuzz
# The map (docs/architecture.md) against Package.swift and the sources' imports, and the check's own tests.
architecture-map: $(if $(STAGED),,venv)
	$(VENV_PY) -m pytest -q -p no:cacheprovider tools/architecture

# The Python (tools: the package, the interop suite, the other tools) with ruff, its rules in pyproject.toml.
format-lint: deps
	$(SWIFT) format lint --strict --recursive $(FORMATTED)
	$(PYTHON) -m ruff check --no-cache tools

format: deps
	$(SWIFT) format format --in-place --recursive $(FORMATTED)
	$(PYTHON) -m ruff check --no-cache --fix tools

unit-test: deps
	$(SWIFT) test

# make test builds once and makes the venv once, then runs each stage with STAGED=1 (no rebuild, no new venv).
PREP := $(if $(STAGED),,venv build)
BUILT := $(if $(STAGED),,build)

# A fresh venv with the fidosim Python package (tools/python) installed as a user would install it.
venv: deps
	rm -rf $(VENV) tools/python/build
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(VENV_PY) -m pip install -q ./tools/python

# The package's examples from a directory outside the clone: with python-fido2 (the venv above), and in a venv
# with the standard library only (the package, pytest, nothing else).
python-package-test: $(PREP)
	bash tools/python/test-install.sh $(CURDIR)/$(BIN) $(VENV_PY) $(PYTHON)

# The PC/SC tests (they own the machine's one pcscd while they run) go in a lane beside the rest: both mostly wait.
# Two lanes: the PC/SC tests and the conformance runner's rig, reply-port and capture tests (mostly waiting on keys)
# beside the rest.
INTEROP_LANE := tools/interop/test_pcsc_interop.py tools/interop/test_conform_rig.py \
	tools/interop/test_udp_reply_port.py tools/interop/test_profile_capture.py
interop: $(PREP)
	@lane_log=$$(mktemp); \
	FIDOSIM_BIN=$(CURDIR)/$(BIN) FIDOSIM_REQUIRE_PCSC=1 $(VENV_PY) -m pytest -p no:benchmark -p no:cacheprovider -q \
	  $(INTEROP_LANE) >$$lane_log 2>&1 & lane_pid=$$!; \
	FIDOSIM_BIN=$(CURDIR)/$(BIN) FIDOSIM_REQUIRE_DESKTOP=1 $(VENV_PY) -m pytest -p no:benchmark -p no:cacheprovider -q \
	  $(addprefix --ignore=,$(INTEROP_LANE)) tools/interop tools/e2e/test_steps.py; rc=$$?; \
	wait $$lane_pid; lane_rc=$$?; echo "interop, second lane ($(INTEROP_LANE)):"; cat $$lane_log; \
	rm -f $$lane_log; [ $$rc = 0 ] && [ $$lane_rc = 0 ]

# python-fido2's device tests, written for real keys, in four configurations (tools/device-suite/run.sh).
device-suite: $(PREP)
	FIDOSIM_BIN=$(CURDIR)/$(BIN) PYTHON=$(VENV_PY) bash tools/device-suite/run.sh

# make test: every stage once, after one debug build (tools/make-test.sh), with a timing table at the end; the VM
# end-to-end run when its tools can be installed (E2E=skip leaves it out). docs/testing.md says what each covers.
test: deps
	@bash tools/make-test.sh

# The clients the VM used to drive over uhid, on this host against private hidraw keys, as the unprivileged user
# fidosim-e2e (made when run as root): libfido2, OpenSSH with sshd, PAM, python-fido2, conform, capture, browsers.
HOST_GROUPS ?= libfido2,ssh,python,conform,browser,pam,capture,deployed
host-e2e: $(BUILT) e2e-deps host-e2e-deps
	HOST_GROUPS=$(HOST_GROUPS) E2E_REPEAT=$(E2E_REPEAT) bash tools/e2e/host-e2e.sh $(CURDIR)/$(BIN)

# The package's browser examples (Playwright and Selenium drive Debian's Chromium and chromedriver against private
# keys) from a directory outside the clone, as the unprivileged user fidosim-e2e when run as root
# (tools/python/test-browser-examples.sh). Debian's python3 runs them, with its pip for their library directory.
BROWSER_EXAMPLES_DEB := chromium:/usr/bin/chromium chromium-driver:/usr/bin/chromedriver python3:/usr/bin/python3 \
	python3-pip:/usr/lib/python3/dist-packages/pip umockdev:/usr/lib/x86_64-linux-gnu/libumockdev-preload.so.0 \
	libumockdev0:/usr/lib/x86_64-linux-gnu/libumockdev.so.0
browser-examples: $(BUILT) browser-examples-deps
	bash tools/python/test-browser-examples.sh $(abspath $(BIN))

browser-examples-deps:
	@missing=""; for pair in $(BROWSER_EXAMPLES_DEB); do [ -e $${pair#*:} ] || missing="$$missing $${pair%%:*}"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages for the browser examples:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

# make test's first half: the Swift tests run beside the fuzz smoke run. Their longest test, the flash store's
# power-cut proof, keeps one core busy for two minutes after the others are done; the fuzz targets build and run on
# the other. The tests are built first, so that only one Swift build runs at a time.
unit-test-and-fuzz-smoke: deps
	$(SWIFT) build --build-tests
	@test_log=$$(mktemp); $(SWIFT) test --skip-build >$$test_log 2>&1 & test_pid=$$!; \
	bash tools/fuzz/run.sh --smoke; fuzz_rc=$$?; wait $$test_pid; test_rc=$$?; \
	echo "swift test (beside the fuzz smoke run):"; grep -E "^✘" $$test_log | head -40; tail -3 $$test_log; \
	[ $$test_rc = 0 ] || tail -200 $$test_log; rm -f $$test_log; [ $$fuzz_rc = 0 ] && [ $$test_rc = 0 ]

# The end-to-end run in a VM: Debian's kernel (with uhid) under virtme-ng, real clients against /dev/hidraw.
E2E_DEB := qemu-system-x86:qemu-system-x86_64 linux-image-amd64:/boot/vmlinuz-* busybox-static:/bin/busybox \
	fido2-tools:fido2-token openssh-client:ssh-keygen chromium:chromium chromium-driver:chromedriver \
	firefox-esr:firefox-esr usbip:usbip
E2E_PY := 'virtme_ng=virtme-ng' 'selenium=selenium' 'websockets=websockets'
# What the host run's clients need beyond the VM's: sshd, pam_u2f with pamtester, umockdev (the private key).
HOST_E2E_DEB := openssh-server:/usr/sbin/sshd libpam-u2f:/usr/bin/pamu2fcfg pamtester:/usr/bin/pamtester \
	umockdev:/usr/lib/x86_64-linux-gnu/libumockdev-preload.so.0 libumockdev0:/usr/lib/x86_64-linux-gnu/libumockdev.so.0 \
	cryptsetup-bin:/usr/sbin/cryptsetup systemd:/usr/bin/systemd-cryptenroll

host-e2e-deps:
	@missing=""; for pair in $(HOST_E2E_DEB); do [ -e $${pair#*:} ] || missing="$$missing $${pair%%:*}"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages for host-e2e:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
E2E_GROUPS ?= libfido2,ssh,python,conform,bridge,gadget,usbip,browser
E2E_REPEAT ?= 1

e2e-deps: deps
	@missing=""; for pair in $(E2E_DEB); do pkg=$${pair%%:*}; probe=$${pair#*:}; \
	  if [ "$${probe#/}" != "$$probe" ]; then ls $$probe >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	  else command -v $$probe >/dev/null || missing="$$missing $$pkg"; fi; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages for e2e:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	@for spec in $(E2E_PY); do mod=$${spec%%=*}; req=$${spec#*=}; \
	  $(PYTHON) -c "import $$mod" 2>/dev/null || { echo "installing $$req from PyPI"; \
	    $(PYTHON) -m pip install -q "$$req" || $(PYTHON) -m pip install -q --break-system-packages "$$req"; }; \
	done

e2e: e2e-deps $(PREP)
	PYTHON=$(VENV_PY) E2E_GROUPS=$(E2E_GROUPS) E2E_REPEAT=$(E2E_REPEAT) bash tools/e2e/run-vm.sh $(CURDIR)/$(BIN)

# e2e when the VM tools are there or can be installed; a machine that cannot install them skips it, saying why.
e2e-auto: $(PREP)
	@if [ "$${E2E:-}" = skip ]; then echo "e2e: skipped (E2E=skip)"; \
	elif ! $(MAKE) --no-print-directory e2e-deps; then echo "e2e: skipped: the VM tools could not be installed"; \
	else PYTHON=$(VENV_PY) E2E_GROUPS=$(E2E_GROUPS) E2E_REPEAT=$(E2E_REPEAT) bash tools/e2e/run-vm.sh $(CURDIR)/$(BIN); fi

# The binary, a man page generated from the argument parser (swift-argument-parser's generate-manual plugin) and the
# completion scripts the binary writes (fidosim --generate-completion-script SHELL).
PREFIX ?= /usr/local
INSTALL_CONFIG ?= release
install: deps
	$(SWIFT) build -c $(INSTALL_CONFIG) --product fidosim
	rm -rf .build/manual && mkdir -p .build/manual
	$(SWIFT) package --allow-writing-to-package-directory generate-manual --configuration $(INSTALL_CONFIG) \
	  --multi-page -o .build/manual
	install -D -m 0755 .build/$(INSTALL_CONFIG)/fidosim $(DESTDIR)$(PREFIX)/bin/fidosim
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0644 .build/manual/fidosim*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	rm -f $(DESTDIR)$(PREFIX)/share/man/man1/fidosim-proof*.1
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	.build/$(INSTALL_CONFIG)/fidosim --generate-completion-script bash \
	  > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/fidosim
	.build/$(INSTALL_CONFIG)/fidosim --generate-completion-script zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_fidosim
	.build/$(INSTALL_CONFIG)/fidosim --generate-completion-script fish \
	  > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/fidosim.fish
	@echo "installed $(DESTDIR)$(PREFIX)/bin/fidosim, man fidosim (and man fidosim.serve, fidosim.ctl, ...), shell completion"

# Give the logged-in user and the fidosim group access to /dev/uhid and to the key's hidraw node.
install-udev:
	$(SUDO) groupadd -f fidosim
	$(SUDO) install -D -m 0644 udev/70-fidosim.rules /etc/udev/rules.d/70-fidosim.rules
	@if [ "$${UHID_AT_BOOT:-}" = 1 ]; then $(SUDO) install -D -m 0644 udev/fidosim-uhid.conf \
	  /etc/modules-load.d/fidosim-uhid.conf; echo "uhid loads at every boot (UHID_AT_BOOT=1)"; \
	else echo "uhid is loaded now, not at every boot (UHID_AT_BOOT=1 makes it so)"; fi
	-$(SUDO) modprobe uhid
	@if command -v udevadm >/dev/null; then $(SUDO) udevadm control --reload-rules && \
	  $(SUDO) udevadm trigger --subsystem-match=misc --subsystem-match=hidraw; \
	else echo "udevadm not found: the rules apply once udev runs"; fi
	@echo "installed; add yourself to the fidosim group (sudo usermod -aG fidosim \$$USER) and log in again"

# The daily key as a systemd user unit, started at login (run as yourself, not root): prompt mode, default image.
install-user-unit: build
	install -D -m 0644 tools/systemd/fidosim.service $${XDG_CONFIG_HOME:-$$HOME/.config}/systemd/user/fidosim.service
	sed -i -e "s|@BIN@|$(CURDIR)/$(BIN)|" -e "s|@DOC@|$(CURDIR)|" \
	  $${XDG_CONFIG_HOME:-$$HOME/.config}/systemd/user/fidosim.service
	systemctl --user daemon-reload && systemctl --user enable --now fidosim.service
	@echo "fidosim starts at login; systemctl --user status fidosim, journalctl --user -u fidosim"

clean:
	rm -rf .build
