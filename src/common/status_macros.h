// Early-return helpers for absl::Status / absl::StatusOr, in the LevelDB habit of checking
// every Status where it is produced.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define WEFT_CONCAT_INNER_(a, b) a##b
#define WEFT_CONCAT_(a, b) WEFT_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::absl::Status weft_status_ = (expr);        \
    if (!weft_status_.ok()) return weft_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, Foo());` binds the value of a StatusOr or returns its Status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  WEFT_ASSIGN_OR_RETURN_IMPL_(WEFT_CONCAT_(weft_statusor_, __LINE__), lhs, expr)
#define WEFT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
