// The balance layer's settings (layer.cpp): the policy CASCADE_BALANCE names.
#pragma once

#include <string_view>

namespace cascade::detail {

// The values of CASCADE_BALANCE: the policies make_policy knows by name.
inline constexpr std::string_view kBalancePolicies[] = {"none", "rotate", "diffusion",
                                                        "master_worker"};

// The policy CASCADE_BALANCE names ("none" when unset); UsageError for another value.
std::string_view policy_from_env();

}  // namespace cascade::detail
