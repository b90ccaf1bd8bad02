// The futures layer: async / future / shared_future / promise / when_all / when_any.
#pragma once

#include "cascade/futures/async.hpp"
#include "cascade/futures/future.hpp"
#include "cascade/futures/state.hpp"
#include "cascade/futures/when.hpp"
