#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of sluice by Debian package name.
# Idempotent: packages already present are left alone. Run as root on Debian 12.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  clang-format      # the format check of the test command (scripts/check-format.sh, .clang-format)
  zstd              # packs the GPU bundle (scripts/gpu-check.sh)
  # libraries sluice links
  libtbb-dev        # oneTBB flow graph
  libabsl-dev       # absl::Status, flags, strings
  libzstd-dev       # frame compression
  libxxhash-dev     # XXH3 checksums
  zlib1g-dev        # reading .gz IDX files
  libopenblas-dev   # CPU backend sgemm
  libturbojpeg0-dev libspng-dev  # DecodeImage: JPEG (libjpeg-turbo's TurboJPEG) and PNG
  libjpeg62-turbo-dev  # JPEG window decoding: libjpeg-turbo's libjpeg API (jpeg_window.h)
  nlohmann-json3-dev  # manifest, report and trace JSON
  libcurl4-openssl-dev  # remote datasets: S3 and HTTP(S) range reads (storage/remote, docs/storage.md)
  openmpi-bin libopenmpi-dev  # data-parallel runs: mpirun, MPI collectives (engine/dist)
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # real data: the original Fashion-MNIST IDX files under /usr/share/datasets/fashion-mnist/
  dataset-fashion-mnist
  # fuzz builds (SLUICE_FUZZ): clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
  # PyTorch side-by-side comparisons (bench/) and the safetensors interop test
  python3 python3-numpy python3-torch python3-torchvision
  python3-pil       # the decode oracle tests write and read images with PIL
  plasma-workspace-wallpapers  # real photographs (94 MB): the augmentation oracle over a photo folder (python/tests/test_augment_photos.py, bench/real_photo_folder.py)
  # the Python package `sluice` (python/, docs/python.md)
  pybind11-dev python3-pybind11 python3-dev  # the extension module _sluice (pybind11 2.10, Python headers)
  libdlpack-dev                  # dlpack/dlpack.h: batches cross to PyTorch as DLPack tensors
  python3-pytest                 # python/tests, run by ctest (README's test command)
  # object storage in the tests, started on 127.0.0.1 only (python/tests/object_servers.py):
  # nginx over HTTPS and HTTP, OpenStack Swift with its s3api middleware (memcached for its
  # tempauth), and the clients a user uploads with
  nginx-light memcached swift-proxy swift-object swift-container swift-account awscli s3cmd
  openssl                        # the tests' self-signed certificate
  chromium                       # renders --report-html headless (tests/tools/report_html_browser_test.py)
  python3-pip python3-setuptools python3-wheel  # `pip install .` offline (setup.py drives CMake)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
