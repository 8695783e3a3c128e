// An output written to stdout, alone there: `--report-json=-` (or /dev/stdout, /dev/fd/1,
// /proc/self/fd/1, or a path naming the file or pipe that stdout is) must give a stream that is
// exactly that output, one JSON document a parser reads, with or without --quiet.
//
// RouteStdoutOutputs finds the output that names stdout. When there is one, the process's
// stdout (descriptor 1) becomes a copy of stderr, so everything else the tool prints (progress,
// the report's text, warnings, printf in any library) goes to stderr, and the output is written
// to /dev/fd/N, a copy of the original stdout (appended to, as every special file is). A regular
// file that stdout is redirected to keeps its path: the write replaces it by a rename, so it
// then holds the output alone. Two outputs on stdout are refused (one would corrupt the
// other), as is "-" when stdout is closed.
//
// Errors: kInvalidArgument naming the flags; a usage error. Thread safety: call once, from
// main, before any other thread starts or anything is printed.
#ifndef SLUICE_TOOLS_STDOUT_OUTPUT_H_
#define SLUICE_TOOLS_STDOUT_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sluice {

// An output flag ("report-json") and its value, rewritten in place when it names stdout.
struct OutputFlag {
  const char* flag;
  std::string* path;
};

absl::Status RouteStdoutOutputs(const std::vector<OutputFlag>& outputs);

// How a message names an output path: "stdout" for the routed one, the path escaped
// (common/printable.h) otherwise.
std::string ShownOutputPath(const std::string& path);

// Called first in main: SIGPIPE is ignored, so a reader of stdout that leaves early
// (`sluice-train ... | head`) makes a write fail with EPIPE instead of killing the process
// before its checkpoint and reports are written.
void IgnoreBrokenPipes();

// Whether stdout's reader has gone: a write to it failed, and it is a pipe or socket whose
// reading end is closed. Printing to stdout after that is pointless.
bool StdoutReaderGone();

// Checked once, at exit, after every file output was written: OK when everything printed on
// stdout reached it; else kInternal "stdout: write failed: <strerror>" (/dev/full, EIO), or
// kFailedPrecondition "stdout: its reader has gone (broken pipe)" unless `reader_gone_ok`
// (the tool's stdout was only progress and summary, not an output the user asked for).
absl::Status FinishStdout(bool reader_gone_ok);

}  // namespace sluice

#endif  // SLUICE_TOOLS_STDOUT_OUTPUT_H_
