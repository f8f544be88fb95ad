// Every op builder of stepscope.
#pragma once

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/collective_ops.h"
#include "stepscope/ops/control_ops.h"
#include "stepscope/ops/data_ops.h"
#include "stepscope/ops/linalg_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/metric_ops.h"
#include "stepscope/ops/nn_ops.h"
#include "stepscope/ops/random_ops.h"
#include "stepscope/ops/reduction_ops.h"
#include "stepscope/ops/sparse_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/ops/summary_ops.h"
#include "stepscope/ops/training_ops.h"
