// What the objects layer knows of balancing: every Objects runs the Balancer CASCADE_BALANCE
// asks for, made by the balance layer. That layer registers how to make and free one while the
// program starts, when its library is linked (src/balance/layer.cpp); without it, no Objects is
// balanced unless the program makes a Balancer.
#pragma once

namespace cascade {

class Balancer;
class Objects;

namespace detail {

struct ImplicitBalancing {
    Balancer* (*make)(Objects& objs);  // the Balancer CASCADE_BALANCE asks for, or null
    void (*free)(Balancer* b) noexcept;
};
// Registers `b` (static storage; null: none) for the Objects made from now on.
void set_implicit_balancing(const ImplicitBalancing* b) noexcept;

}  // namespace detail
}  // namespace cascade
