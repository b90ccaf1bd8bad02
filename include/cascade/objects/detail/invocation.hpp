// One request addressed to a mobile object: a handler call, a migration or a destruction,
// with the routing and ordering information that travels with it. Its header is also the
// wire format of the objects.invoke message (followed by the serialized arguments).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cascade/objects/mobile_ptr.hpp"

namespace cascade::detail {

// rebalance: a migration asked by a balancing policy, skipped if the object is pinned.
enum class OpKind : std::uint8_t { handler = 0, migrate = 1, destroy = 2, pin = 3, rebalance = 4 };

struct InvokeHead {
    ObjectKey key;
    std::uint32_t handler = 0;   // handler id (OpKind::handler)
    std::uint32_t sig = 0;       // handler signature, checked on arrival
    std::int32_t sender = 0;     // issuing rank: ordering, lazy updates, replies
    std::int32_t arg = -1;       // OpKind::migrate: destination rank
    std::uint64_t seq = 0;       // per (sender, object), from 0
    std::uint64_t token = 0;     // call(): the sender's result state (0: none)
    std::uint64_t hint_ver = 0;  // freshest location known on the way: hint_loc at version hint_ver
    std::int32_t hint_loc = -1;
    std::uint16_t hops = 0;     // forwards so far
    std::uint8_t via_home = 0;  // already routed through the home rank
    OpKind kind = OpKind::handler;
};

struct Invocation {
    InvokeHead h;
    std::vector<char> args;  // serialized handler arguments
};

// Requests are made and freed several times per handler call and per migration (a handler's
// invoke, the copy that travels with a migrating object, the one read on arrival). They come
// from a small per-thread cache that keeps each one's argument buffer: a request made where
// another was freed allocates nothing. new_invocation() gives a request with no arguments
// and a head left as it was (the caller writes the whole head); free_invocation() takes it
// back (null: nothing).
Invocation* new_invocation();
void free_invocation(Invocation* inv) noexcept;
struct FreeInvocation {
    void operator()(Invocation* inv) const noexcept { free_invocation(inv); }
};
using InvocationPtr = std::unique_ptr<Invocation, FreeInvocation>;

}  // namespace cascade::detail
