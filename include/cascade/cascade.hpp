// Cascade: a lightweight distributed task-based runtime. Include this for everything.
#pragma once

#include "cascade/comm/active_msg.hpp"
#include "cascade/comm/communicator.hpp"
#include "cascade/comm/view.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/key.hpp"
#include "cascade/core/taskflow.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/futures/futures.hpp"
#include "cascade/objects/objects.hpp"
#include "cascade/trace/recorder.hpp"
