// How many times the calling thread waited, or called something that may wait: a future's
// get() on a value not ready yet (futures layer), a device task's wait() or get() and a host
// request's get() (device layer), ready or not. The objects and futures layers compare it
// before and after a handler or a remote call: one that waited is never run on the
// communication thread on its own (see CallStats), where its next wait could hold up the
// messages it waits for.
#pragma once

#include <cstdint>

namespace cascade::detail {

inline thread_local std::uint64_t tls_waits = 0;

}  // namespace cascade::detail
