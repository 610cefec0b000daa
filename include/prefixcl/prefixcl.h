/* prefixcl: the whole public API. See README.md and docs/. */
#ifndef PREFIXCL_PREFIXCL_H
#define PREFIXCL_PREFIXCL_H

#include "prefixcl/common.h"
#include "prefixcl/runtime.h"
#include "prefixcl/tensor.h"
#include "prefixcl/elementwise.h"
#include "prefixcl/attention.h"
#include "prefixcl/optimizer.h"
#include "prefixcl/io.h"
#include "prefixcl/tokenizer.h"
#include "prefixcl/data.h"
#include "prefixcl/encoder.h"
#include "prefixcl/layer.h"
#include "prefixcl/model.h"
#include "prefixcl/matmul.h"
#include "prefixcl/gemm_tune.h"
#include "prefixcl/profile.h"
#include "prefixcl/generate.h"
#include "prefixcl/scheduler.h"
#include "prefixcl/pretrain.h"
#include "prefixcl/tune.h"
#include "prefixcl/eval.h"
#include "prefixcl/dist.h"

#endif
