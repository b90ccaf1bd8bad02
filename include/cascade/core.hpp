// Cascade's core without MPI: the thread pool, task graphs, settings and tracing. Include this
// (and link Cascade::core, or pkg-config's cascade-core) for a program on one process; it pulls
// no <mpi.h>. <cascade/cascade.hpp> includes this and the distributed layers.
#pragma once

#include "cascade/core/errors.hpp"
#include "cascade/core/key.hpp"
#include "cascade/core/log.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/core/taskflow.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/core/workers.hpp"
#include "cascade/trace/recorder.hpp"
#include "cascade/version.hpp"
