// TaskTorrent's umbrella header, served by Cascade's compatibility layer: programs written for
// TaskTorrent (`#include "tasktorrent/tasktorrent.hpp"`, namespace ttor) compile unchanged
// against Cascade. See <cascade/compat/ttor.hpp> for what maps to what.
#pragma once

#include "cascade/compat/ttor.hpp"

// TaskTorrent's headers put the std namespace in the global one, and its programs rely on
// it (`array<int, 2>` unqualified). Only this header does so; <cascade/compat/ttor.hpp>
// does not.
using namespace std;
