#!/usr/bin/env bash
# Set up everything the app (and, with --test, the test suite) needs: system packages, a virtual
# environment in .venv and the pinned Python packages. Safe to run again: each step is skipped
# when already done, so a second run takes a second or two.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

python3 - <<'PY' || { echo "Python 3.10-3.12 is required as python3 (found $(python3 --version 2>&1))." >&2; exit 1; }
import sys
sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 12) else 1)
PY

as_root() {
  if [[ "$(id -u)" == 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else return 1
  fi
}

apt_install() {
  command -v apt-get >/dev/null || return 1
  echo "==> Installing system packages: $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

required=()
# torchcodec (audio decoding for torchaudio) loads FFmpeg's shared libraries.
python3 -c 'import ctypes.util, sys; sys.exit(0 if ctypes.util.find_library("avcodec") else 1)' || required+=(ffmpeg)
python3 -c 'import ensurepip, venv' 2>/dev/null || required+=(python3-venv)
if (( ${#required[@]} )); then
  apt_install "${required[@]}" || { echo "Please install: ${required[*]} (as root), then run this again." >&2; exit 1; }
fi
if [[ $want_test == 1 ]]; then
  test_only=()
  command -v chromium >/dev/null && command -v chromedriver >/dev/null || test_only+=(chromium chromium-driver)
  command -v espeak-ng >/dev/null || test_only+=(espeak-ng)  # speech for the quality tests
  if (( ${#test_only[@]} )); then
    # Only some tests need them; those are skipped, saying why, when they cannot be installed.
    apt_install "${test_only[@]}" || echo "warning: could not install ${test_only[*]}" >&2
  fi
fi

if [[ ! -x .venv/bin/python ]]; then
  echo "==> Creating the virtual environment in .venv"
  python3 -m venv .venv
fi

requirements=requirements.txt
[[ $want_test == 1 ]] && requirements=requirements-test.txt
stamp=".venv/.installed-$(basename "$requirements" .txt)"
digest="$(cat requirements.txt requirements-nodeps.txt "$requirements" | sha256sum | cut -d' ' -f1)"
installed() {  # the stamp of a requirements file holds the digest of what it installed
  [[ "$(cat ".venv/.installed-$(basename "$1" .txt)" 2>/dev/null)" == \
     "$(cat requirements.txt requirements-nodeps.txt "$1" | sha256sum | cut -d' ' -f1)" ]]
}
# The test set includes the app's (requirements-test.txt starts with -r requirements.txt): after ./run_tests.sh,
# ./run_app.sh starts at once.
if ! installed "$requirements" && ! { [[ $want_test == 0 ]] && installed requirements-test.txt; }; then
  echo "==> Installing Python packages from $requirements (the first time takes a few minutes: PyTorch is large)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r "$requirements"
  # Packages whose declared dependencies cannot be installed as such (see requirements.txt).
  .venv/bin/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
  echo "$digest" > "$stamp"
fi
