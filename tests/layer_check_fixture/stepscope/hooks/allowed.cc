// A hooks file including a core header: allowed (core is below hooks).
#include "stepscope/core/tensor.h"
