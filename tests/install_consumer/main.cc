// A program outside the project, built against an installed stepscope (tests/install_test.sh):
// a two-node graph run by a Session. Prints "stepscope <version>: 2 + 3 = 5".
#include <iostream>

#include "stepscope/base/version.h"
#include "stepscope/graph/scope.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"

int main() {
  using namespace stepscope;
  Graph g;
  Scope root(g);
  Output sum = add(root, constant(root, 2.0f), constant(root, 3.0f));
  Session session(g);
  std::cout << "stepscope " << STEPSCOPE_VERSION << ": 2 + 3 = " << session.run(sum).scalar_value<float>() << "\n";
}
