// Turns the return addresses of a node's creation stack (graph/call_stack.h) into source frames,
// with elfutils' libdw (dwfl: the process's modules from /proc/self/maps, so PIE and shared
// libraries are handled; function names from the symbol tables, file:line from the line tables
// when the code was built with debug info, e.g. -g1). Results are cached per address for the
// life of the process; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/graph/node.h"

namespace stepscope {

// The frames at a return address, innermost first: the functions inlined at the call (from the
// debug info's inlined-subroutine scopes) and the function the address is in. Each has its file
// ("" without debug info), line (0 then) and demangled function ("" when no symbol covers the
// address).
std::vector<SourceLocation> symbolize_address(uintptr_t return_address);

// The user's part of a creation stack, outermost first: the frames from main (or the outermost
// frame captured) down to the innermost frame of user code, then the stepscope function that
// frame called (the public API, as TensorFlow shows tf's own Python frame). The innermost user
// frame is the one of the function `site` (the std::source_location the API recorded) names,
// else the innermost frame outside stepscope's library (sources under src/stepscope/<layer>/ but
// tests, installed stepscope headers; without debug info: functions in namespace stepscope).
// It takes the site's file and line (exact, and there even without debug info); when the site's
// function was inlined beyond what the debug info tells, the site is added as a frame of its
// own. What runs before main is left out. Empty when nothing could be symbolised.
std::vector<SourceLocation> user_call_stack(std::span<const uintptr_t> return_addresses, const SourceLocation& site);

// "function" from a compiler's signature or a demangled symbol: "int ns::f(const T&) const" ->
// "f", lambdas -> "<lambda>".
std::string bare_function_name(std::string_view signature);

}  // namespace stepscope
