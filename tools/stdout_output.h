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

}  // namespace sluice

#endif  // SLUICE_TOOLS_STDOUT_OUTPUT_H_
