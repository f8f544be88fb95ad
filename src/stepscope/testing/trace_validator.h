// Checks a Chrome Trace Format JSON text against the rules of reference/chrome-trace.md §4.4
// (what chrome://tracing and Perfetto need to show a trace as written).
//
// Each problem names its rule (the strings below) and says where: the event's index in
// traceEvents and what is wrong. Errors break a viewer (the event is dropped, mis-drawn or the
// file does not load); warnings are legal but unwise (see each rule). Rules:
//   json               the text is not JSON (raw control characters in strings included)
//   container          top level not an array or an object with a traceEvents array
//   display-time-unit  E: not "ms"/"ns"; E: without "ns", a slice shorter than 1 µs or
//                      starting within 1 µs of the previous slice's end on its thread
//                      (catapult nests on whole µs then: it lands under a neighbour)
//   event              E: not an object, ph missing or unknown, ts missing or not a number
//                      (but on M), pid missing, tid missing (but on process-level M and s:g/p
//                      instants); W: string pid/tid, negative ts/dur/tid
//   ts-finite          E: ts or dur not a finite number
//   ts-format          W: ts/dur not written as microseconds with exactly three decimals
//                      (ns precision; what stepscope writes)
//   ts-precision       W: ts with more than 15 significant digits
//   complete-dur       E: X without a numeric dur ≥ 0
//   end-unmatched      E: E with no open B on its (pid, tid)
//   begin-unclosed     W: B never closed
//   end-name           W: E's name differs from its B's
//   begin-end-order    E: B/E timestamps going backwards on a thread
//   nesting            E: slices (B/E/X) partially overlapping on one (pid, tid);
//                      W: two slices with equal start and duration (order decides nesting)
//   instant-scope      E: i/I with s not in {g, p, t}
//   counter-args       E: C args not an object or a value neither a number nor a numeric string;
//                      W: more than 16 series
//   async-id           E: b/n/e with neither or both of id and id2; E: e without open b;
//                      W: b never closed
//   flow-fields        E: s/t/f without id, name or cat
//   flow-bp            E: bp present and not "e"
//   flow-binding       E: s/t (or f with bp "e") with no enclosing slice at its ts on its
//                      thread; f without bp with no slice starting at or after its ts
//   flow-id-reuse      E: an s for an id (with cat, name) whose flow is open
//   flow-unmatched     E: t/f without an open s
//   flow-unterminated  W: an s never ended by an f
//   flow-v2            E: bind_id without flow_in/flow_out
//   metadata           E: M with an unknown name or without its arg (name, labels, sort_index)
//   object             E: N/O/D without id; O without args.snapshot; D without an earlier N
//                      of that id in that process
//   not-rendered       W: phases Perfetto ignores (v V S T F p c ( ) = and N/O/D). N/O/D are
//                      let through when the trace also has C counters (memory then shows in
//                      Perfetto; the objects are chrome://tracing's tensor tracks, TensorFlow's
//                      layout)
//   size               W: more than 256 MB (chrome://tracing) or 1 GB (the Perfetto UI)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stepscope {

struct TraceProblem {
  std::string rule;
  std::string message;
  bool warning = false;  // false: an error (a viewer drops, mis-draws or refuses it)
};

// Every problem found, errors and warnings, in the order found.
std::vector<TraceProblem> validate_chrome_trace(std::string_view json);

}  // namespace stepscope
