# Every dependency comes from a Debian 12 package; scripts/install-deps.sh installs them.
find_package(Threads REQUIRED)
find_package(TBB REQUIRED)                       # libtbb-dev
find_package(absl REQUIRED)                      # libabsl-dev
find_package(ZLIB REQUIRED)                      # zlib1g-dev
find_package(GTest REQUIRED)                     # libgtest-dev, libgmock-dev
find_package(nlohmann_json 3 REQUIRED)           # nlohmann-json3-dev
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)      # libzstd-dev
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)  # libxxhash-dev
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas) # libopenblas-dev
if(SLUICE_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)               # libbenchmark-dev
endif()
