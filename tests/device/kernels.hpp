// CPU kernels the device tests share.
#pragma once

#include <stdexcept>

#include "cascade/device/kernel.hpp"

namespace device_test {

// A kernel whose one variant (cpu) throws std::domain_error("bad input in thrower").
inline cascade::Kernel& throwing_kernel() {
    static cascade::Kernel k("thrower");
    static const bool once = [] {
        k.cpu([](cascade::KernelArgs&) { throw std::domain_error("bad input in thrower"); });
        return true;
    }();
    (void)once;
    return k;
}

}  // namespace device_test
