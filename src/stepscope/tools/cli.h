// The `stepscope` command line, as a function so that tests run it in-process:
//
//   stepscope prof VIEW --profile FILE [tfprof flags]    scope | op | graph | code | advise
//   stepscope timeline (--run_meta FILE | --profile FILE [--step N]) --output OUT.json[.gz]
//   stepscope critical_path (--run_meta FILE | --profile FILE [--step N])
//   stepscope diff A[@STEP] [B[@STEP]] [--step-a N] [--step-b N] [--json] [--fail-if-slower PCT]
//                                                        (diff_command.h)
//   stepscope merge -o OUT.json TRACE...                  a data-parallel job's ranks' timelines
//                                                        on one clock (merge_command.h)
//   stepscope serve DIR [--host H] [--port P]
//
// tfprof's flags are accepted as TensorFlow's tfprof tool spells them (`-max_depth 3`,
// `--max_depth=3`); `stepscope <command> --help` lists them.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace stepscope {

// `args` without the program name. Returns the exit status: 0, 1 for an error (the message on
// `err`, naming the file or flag at fault), 2 for a command-line mistake (with usage), 3 when
// `diff --fail-if-slower` trips.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace stepscope
