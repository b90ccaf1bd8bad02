// HostPool: the device runtime's host copies. Freed ones are kept by size (already mapped
// and faulted in, as page-locked memory stays) and handed out again, up to kMaxBytes kept,
// when the pool is on. Any thread.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cascade::device::detail {

class HostPool {
  public:
    static constexpr std::size_t kMaxBytes = std::size_t(1) << 30;

    explicit HostPool(bool on) : on_(on) {}
    HostPool(const HostPool&) = delete;
    HostPool& operator=(const HostPool&) = delete;
    ~HostPool();

    /// `bytes` bytes aligned to 64 (zeroed if `zero`); std::bad_alloc if none.
    void* allocate(std::size_t bytes, bool zero);
    /// Gives back what allocate(bytes) returned.
    void deallocate(void* p, std::size_t bytes) noexcept;
    /// Bytes kept for reuse.
    std::size_t kept() const;

  private:
    static std::size_t rounded(std::size_t bytes) noexcept {
        return bytes < 64 ? 64 : (bytes + 63) / 64 * 64;
    }
    const bool on_;
    mutable std::mutex mutex_;
    std::unordered_map<std::size_t, std::vector<void*>> free_;  // by rounded size
    std::size_t kept_ = 0;
};

}  // namespace cascade::device::detail
