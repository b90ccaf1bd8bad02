// Cascade: a lightweight distributed task-based runtime. Include this for everything.
#pragma once

#include "cascade/balance/balancer.hpp"
#include "cascade/balance/diffusion.hpp"
#include "cascade/balance/master_worker.hpp"
#include "cascade/comm/active_msg.hpp"
#include "cascade/comm/communicator.hpp"
#include "cascade/comm/node.hpp"
#include "cascade/comm/view.hpp"
#include "cascade/core.hpp"
#include "cascade/futures/futures.hpp"
#include "cascade/objects/objects.hpp"
