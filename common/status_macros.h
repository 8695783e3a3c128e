// RETURN_IF_ERROR / ASSIGN_OR_RETURN: Debian's Abseil (20220623) ships status.h and statusor.h
// but not status_macros.h, so sluice keeps its own.
#ifndef SLUICE_COMMON_STATUS_MACROS_H_
#define SLUICE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SLUICE_CONCAT_INNER_(a, b) a##b
#define SLUICE_CONCAT_(a, b) SLUICE_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status sluice_status_ = (expr);          \
    if (!sluice_status_.ok()) return sluice_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); evaluates an absl::StatusOr<T>, returns its status on
// error, otherwise moves the value into `lhs`.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  SLUICE_ASSIGN_OR_RETURN_IMPL_(SLUICE_CONCAT_(sluice_statusor_, __LINE__), lhs, rexpr)

#define SLUICE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // SLUICE_COMMON_STATUS_MACROS_H_
