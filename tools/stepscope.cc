// The stepscope command line (see src/stepscope/tools/cli.h).
#include <iostream>

#include "stepscope/tools/cli.h"

int main(int argc, char** argv) {
  return stepscope::run_cli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
