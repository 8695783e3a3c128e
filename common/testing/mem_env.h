// An Env holding files in memory, for tests, fuzzers and benchmarks (target sluice::testing;
// production code uses Env::Default()). As leveldb's helpers/memenv.
//
// Directories are implicit: CreateDirs does nothing and GetChildren lists the files whose path
// continues `dir` with one more component. A RandomAccessFile reads a snapshot of the file taken
// when it was opened. LockFile keeps a set of locked paths, so two holders in one process
// conflict as two processes do (docs/formats/lock.md).
// Ownership: the caller owns the Env; it must outlive every file it opened.
// Thread safety: thread safe.
#ifndef SLUICE_COMMON_TESTING_MEM_ENV_H_
#define SLUICE_COMMON_TESTING_MEM_ENV_H_

#include <memory>

#include "common/env.h"

namespace sluice {

std::unique_ptr<Env> NewMemEnv();

}  // namespace sluice

#endif  // SLUICE_COMMON_TESTING_MEM_ENV_H_
