// HostPool (host_pool.hpp): host copies kept by size for reuse.
#include "host_pool.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace cascade::device::detail {

HostPool::~HostPool() {
    for (auto& [n, ptrs] : free_)
        for (void* p : ptrs)
            std::free(p);
}

void* HostPool::allocate(std::size_t bytes, bool zero) {
    const std::size_t n = rounded(bytes);
    void* p = nullptr;
    if (on_) {
        std::lock_guard<std::mutex> g(mutex_);
        auto it = free_.find(n);
        if (it != free_.end() && !it->second.empty()) {
            p = it->second.back();
            it->second.pop_back();
            kept_ -= n;
        }
    }
    if (!p) p = std::aligned_alloc(64, n);
    if (!p) throw std::bad_alloc();
    if (zero) std::memset(p, 0, bytes);
    return p;
}

void HostPool::deallocate(void* p, std::size_t bytes) noexcept {
    const std::size_t n = rounded(bytes);
    if (on_) {
        std::lock_guard<std::mutex> g(mutex_);
        if (kept_ + n <= kMaxBytes) {
            try {
                free_[n].push_back(p);
                kept_ += n;
                return;
            } catch (...) {
            }
        }
    }
    std::free(p);
}

std::size_t HostPool::kept() const {
    std::lock_guard<std::mutex> g(mutex_);
    return kept_;
}

}  // namespace cascade::device::detail
