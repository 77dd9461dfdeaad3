#!/usr/bin/env bash
# Installs what fusegen needs on a fresh Debian 12 machine, idempotently: the Debian
# packages it builds against and the Python packages its generated ops are built and tested
# with. Packages already present are not touched, so a second run takes a second.
set -euo pipefail

APT_PACKAGES=(cmake ninja-build g++ python3 libyaml-cpp-dev libcli11-dev libkainjow-mustache-dev
              libgtest-dev libclang-cpp16-dev libclang-16-dev llvm-16-dev
              # the sanitizer build (build-asan) and the fuzz target: clang-14 with its
              # ASan/UBSan/libFuzzer runtimes, and llvm-symbolizer for readable reports
              clang-14 libclang-rt-14-dev llvm-14
              # a second LLVM/Clang, which CI links the wheel's fusegen with
              # (scripts/build_wheel.sh): fusegen builds against 14 to 19
              libclang-cpp19-dev libclang-19-dev llvm-19-dev)
# torch is pinned to the version on the GPU machine, so CI compiles what runs there.
TORCH_VERSION=${FUSEGEN_TORCH_VERSION:-2.11.0}
PYTHON=${PYTHON:-python3}

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "install_deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

pip_missing=()
"$PYTHON" - <<PY || pip_missing+=("torch==$TORCH_VERSION")
import torch, sys
sys.exit(0 if torch.__version__.split("+")[0] == "$TORCH_VERSION" else 1)
PY
for m in pytest numpy wheel expecttest; do
  "$PYTHON" -c "import $m" 2>/dev/null || pip_missing+=("$m")
done
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "install_deps: pip install ${pip_missing[*]}"
  "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore "${pip_missing[@]}"
fi
echo "install_deps: all dependencies present"
