// How the device layer plugs into the layers below it when its library is linked: its settings
// join the table (settings::add; CASCADE_DEVICE_MEMORY is parsed where the devices start,
// runtime.cpp). Cascade::device's link interface names cascade_layer_device (-u), so a program
// that links the library gets this file even from a static archive.
#include "cascade/core/settings.hpp"

namespace cascade::device {
namespace {

// Keep in step with the README's settings table (a test compares them).
constexpr settings::Variable kVariables[] = {
    {"CASCADE_DEVICE_MEMORY", "bytes, optionally with K, M or G (e.g. 512M)",
     "the device's own memory", "data bytes each device of the device layer may hold"},
};

[[maybe_unused]] const bool g_installed = (settings::add(kVariables, nullptr), true);

}  // namespace
}  // namespace cascade::device

// See the top of this file.
extern "C" void cascade_layer_device() noexcept {}
