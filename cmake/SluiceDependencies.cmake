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
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg) # libturbojpeg0-dev (DecodeImage)
pkg_check_modules(LIBJPEG REQUIRED IMPORTED_TARGET libjpeg)        # libjpeg62-turbo-dev (jpeg_window.h)
pkg_check_modules(SPNG REQUIRED IMPORTED_TARGET spng)         # libspng-dev (DecodeImage)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)       # libcurl4-openssl-dev (storage/remote: object storage)
if(SLUICE_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)               # libbenchmark-dev
endif()

# MPI (libopenmpi-dev): launch and CPU collectives of data-parallel runs (engine/dist). Without
# it sluice builds as a single-process tool that refuses to run under mpirun/srun.
set(SLUICE_MPI "AUTO" CACHE STRING "Build with MPI: AUTO (when found), ON or OFF")
set_property(CACHE SLUICE_MPI PROPERTY STRINGS AUTO ON OFF)
set(SLUICE_HAVE_MPI OFF)
if(NOT SLUICE_MPI STREQUAL "OFF")
  if(SLUICE_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(SLUICE_HAVE_MPI ON)
  endif()
endif()
message(STATUS "sluice: MPI ${SLUICE_HAVE_MPI}")
# How the tests launch ranks: as root in a container, Open MPI needs --allow-run-as-root, and
# its shared-memory transport must not use CMA single-copy (it needs ptrace rights containers
# lack); --oversubscribe lets 2 ranks share fewer cores.
if(SLUICE_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  set(SLUICE_MPIRUN ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe
      --mca btl_vader_single_copy_mechanism none)
endif()
