// Plain data shared by the host runtime and both executors, in one include: limits, connection regions, descriptors,
// flagged words and the engine's memory.
#pragma once

#include "desc.h"
#include "engine_memory.h"
#include "flagged.h"
#include "limits.h"
#include "region.h"
