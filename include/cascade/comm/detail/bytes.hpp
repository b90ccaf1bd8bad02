// detail::Bytes: the byte vectors messages are built and received in.
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace cascade {

namespace detail {
// Allocator whose resize() leaves new elements uninitialized: message buffers are written
// right after they grow, so zero-filling them first (a pass over megabytes for big
// arguments) is wasted.
template <class T>
struct UninitAllocator : std::allocator<T> {
    using value_type = T;
    template <class U>
    struct rebind {
        using other = UninitAllocator<U>;
    };
    UninitAllocator() = default;
    template <class U>
    UninitAllocator(const UninitAllocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... A>
    void construct(U* p, A&&... a) {
        ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
    friend bool operator==(const UninitAllocator&, const UninitAllocator&) noexcept { return true; }
};
using Bytes = std::vector<char, UninitAllocator<char>>;
}  // namespace detail

}  // namespace cascade
