#include "stepscope/base/error.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stepscope {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kCancelled:
      return "Cancelled";
    case ErrorCode::kUnknown:
      return "Unknown";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kAlreadyExists:
      return "AlreadyExists";
    case ErrorCode::kPermissionDenied:
      return "PermissionDenied";
    case ErrorCode::kResourceExhausted:
      return "ResourceExhausted";
    case ErrorCode::kFailedPrecondition:
      return "FailedPrecondition";
    case ErrorCode::kAborted:
      return "Aborted";
    case ErrorCode::kOutOfRange:
      return "OutOfRange";
    case ErrorCode::kUnimplemented:
      return "Unimplemented";
    case ErrorCode::kInternal:
      return "Internal";
    case ErrorCode::kUnavailable:
      return "Unavailable";
    case ErrorCode::kDataLoss:
      return "DataLoss";
  }
  return "Unknown";
}

void throw_os_error(int err, const std::string& what) {
  const std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      throw NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      throw PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      throw ResourceExhaustedError(message);
    case EEXIST:
      throw AlreadyExistsError(message);
    case EISDIR:
      throw FailedPreconditionError(message);
    default:
      throw UnknownError(message);
  }
}

void throw_error(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::kCancelled:
      throw CancelledError(message);
    case ErrorCode::kUnknown:
      throw UnknownError(message);
    case ErrorCode::kInvalidArgument:
      throw InvalidArgumentError(message);
    case ErrorCode::kDeadlineExceeded:
      throw DeadlineExceededError(message);
    case ErrorCode::kNotFound:
      throw NotFoundError(message);
    case ErrorCode::kAlreadyExists:
      throw AlreadyExistsError(message);
    case ErrorCode::kPermissionDenied:
      throw PermissionDeniedError(message);
    case ErrorCode::kResourceExhausted:
      throw ResourceExhaustedError(message);
    case ErrorCode::kFailedPrecondition:
      throw FailedPreconditionError(message);
    case ErrorCode::kAborted:
      throw AbortedError(message);
    case ErrorCode::kOutOfRange:
      throw OutOfRangeError(message);
    case ErrorCode::kUnimplemented:
      throw UnimplementedError(message);
    case ErrorCode::kInternal:
      throw InternalError(message);
    case ErrorCode::kUnavailable:
      throw UnavailableError(message);
    case ErrorCode::kDataLoss:
      throw DataLossError(message);
  }
  throw UnknownError(message);
}

void internal_check_failed(const char* file, int line, const char* what) {
  std::fprintf(stderr, "stepscope internal check failed at %s:%d: %s\n", file, line, what);
  std::abort();
}

}  // namespace stepscope
