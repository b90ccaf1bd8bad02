// How the futures layer plugs into the layers below it when its library is linked: its
// settings join the table (settings::add). Cascade::futures's link interface names
// cascade_layer_futures (-u), so a program that links the library gets this file even from a
// static archive.
#include "cascade/core/settings.hpp"

namespace cascade {
namespace {

// Keep in step with the README's settings table (a test compares them).
constexpr settings::Variable kVariables[] = {
    {"CASCADE_FUTURE_WARN_S", "seconds (up to 1e6), 0 or off", "30",
     "a future's get() that waits longer warns once, naming the rank"},
};

void check() {
    settings::seconds("CASCADE_FUTURE_WARN_S", 0, settings::kMaxSeconds);
}

[[maybe_unused]] const bool g_installed = (settings::add(kVariables, &check), true);

}  // namespace
}  // namespace cascade

// See the top of this file.
extern "C" void cascade_layer_futures() noexcept {}
