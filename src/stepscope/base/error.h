// The error hierarchy of stepscope. User-facing failures are exceptions that carry one of
// TensorFlow's error codes, because the hook contract is written in terms of them:
// OutOfRangeError ends a training loop cleanly, AbortedError/UnavailableError make a
// MonitoredSession recreate its session. Every message names the node and op at fault,
// e.g. "[MatMul] layer1/MatMul: inner dimensions differ: [64,784] x [100,10]".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace stepscope {

enum class ErrorCode {
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

std::string_view error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

#define STEPSCOPE_DEFINE_ERROR(Name, Code)                                         \
  class Name : public Error {                                                      \
   public:                                                                         \
    explicit Name(const std::string& message) : Error(ErrorCode::Code, message) {} \
  };

STEPSCOPE_DEFINE_ERROR(CancelledError, kCancelled)
STEPSCOPE_DEFINE_ERROR(UnknownError, kUnknown)
STEPSCOPE_DEFINE_ERROR(InvalidArgumentError, kInvalidArgument)
STEPSCOPE_DEFINE_ERROR(DeadlineExceededError, kDeadlineExceeded)
STEPSCOPE_DEFINE_ERROR(NotFoundError, kNotFound)
STEPSCOPE_DEFINE_ERROR(AlreadyExistsError, kAlreadyExists)
STEPSCOPE_DEFINE_ERROR(PermissionDeniedError, kPermissionDenied)
STEPSCOPE_DEFINE_ERROR(ResourceExhaustedError, kResourceExhausted)
STEPSCOPE_DEFINE_ERROR(FailedPreconditionError, kFailedPrecondition)
STEPSCOPE_DEFINE_ERROR(AbortedError, kAborted)
STEPSCOPE_DEFINE_ERROR(OutOfRangeError, kOutOfRange)
STEPSCOPE_DEFINE_ERROR(UnimplementedError, kUnimplemented)
STEPSCOPE_DEFINE_ERROR(InternalError, kInternal)
STEPSCOPE_DEFINE_ERROR(UnavailableError, kUnavailable)
STEPSCOPE_DEFINE_ERROR(DataLossError, kDataLoss)

#undef STEPSCOPE_DEFINE_ERROR

// Throws the exception type that matches `code` (used to re-raise a worker's error).
[[noreturn]] void throw_error(ErrorCode code, const std::string& message);

// An OS call failed with errno `err` while doing `what` (which names the file): the error type
// a user can act on (NotFound, PermissionDenied, ResourceExhausted for a full disk, ...) with
// "<what>: <strerror>".
[[noreturn]] void throw_os_error(int err, const std::string& what);

// Broken internal invariant: prints the message and aborts. Never for user errors.
[[noreturn]] void internal_check_failed(const char* file, int line, const char* what);

}  // namespace stepscope

#define STEPSCOPE_CHECK(cond) ((cond) ? (void)0 : ::stepscope::internal_check_failed(__FILE__, __LINE__, #cond))
