// How the balance layer plugs into the layers below it when its library is linked: every
// Objects runs the Balancer CASCADE_BALANCE asks for, made here (the objects layer's
// detail::set_implicit_balancing), and the layer's settings join the table (settings::add).
// Cascade::balance's link interface names cascade_layer_balance (-u), so a program that links
// the library gets this file even from a static archive.
#include "layer.hpp"

#include "cascade/balance/balancer.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/objects/detail/balancing.hpp"

namespace cascade::detail {

std::string_view policy_from_env() {
    return kBalancePolicies[settings::choice("CASCADE_BALANCE", 0, kBalancePolicies)];
}

namespace {

// Keep in step with the README's settings table (a test compares them).
constexpr settings::Variable kVariables[] = {
    {"CASCADE_BALANCE", "none, rotate, diffusion or master_worker", "none",
     "the load-balancing policy every `Objects` runs with no code (and a Balancer made without "
     "one)"},
};

void check() {
    policy_from_env();
}

// The Balancer CASCADE_BALANCE asks for (null for none).
Balancer* make_implicit(Objects& objs) {
    const std::string_view policy = policy_from_env();
    if (policy == kBalancePolicies[0]) return nullptr;  // none
    return new Balancer(objs, make_policy(std::string(policy)));
}

void free_implicit(Balancer* b) noexcept {
    delete b;
}

constexpr ImplicitBalancing kImplicit{&make_implicit, &free_implicit};

[[maybe_unused]] const bool g_installed = [] {
    settings::add(kVariables, &check);
    set_implicit_balancing(&kImplicit);
    return true;
}();

}  // namespace
}  // namespace cascade::detail

// See the top of this file.
extern "C" void cascade_layer_balance() noexcept {}
