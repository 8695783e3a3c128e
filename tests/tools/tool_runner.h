// Running the built tools from end-to-end tests as a user's shell would, and reading what they
// print.
#ifndef SLUICE_TESTS_TOOLS_TOOL_RUNNER_H_
#define SLUICE_TESTS_TOOLS_TOOL_RUNNER_H_

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sluice::testing {

struct ToolOutput {
  int exit_code = -1;  // -1: killed by a signal, or the shell could not start
  std::string text;    // stdout + stderr, interleaved as printed
  double seconds = 0;  // wall clock of the whole command
};

// Runs `command` with /bin/sh, stderr merged into stdout, and waits for it.
inline ToolOutput RunShell(const std::string& command) {
  ToolOutput out;
  const auto start = std::chrono::steady_clock::now();
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.text.append(buf, n);
  const int status = ::pclose(p);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// The accuracy on sluice-train's first "final test accuracy: X" line; -1 when there is none.
inline double FinalAccuracy(const std::string& text) {
  const std::string key = "final test accuracy: ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + key.size());
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TOOLS_TOOL_RUNNER_H_
