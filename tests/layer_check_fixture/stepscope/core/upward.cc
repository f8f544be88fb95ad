// A core file including a hooks header: scripts/check_layers.py must reject it
// (the test architecture.layer_check_rejects_an_upward_include).
#include "stepscope/core/upward.h"
#include "stepscope/hooks/session_run_hook.h"
