// The per-thread cache of requests (detail/invocation.hpp).
#include "cascade/objects/detail/invocation.hpp"

namespace cascade::detail {

namespace {

// At most this many requests per thread, each keeping an argument buffer of at most
// kKeepArgs bytes. Only threads that make requests keep any (the list is reserved by the
// first new_invocation, so that freeing never allocates): a worker that only runs requests
// the communication thread received hands them back to the allocator.
constexpr std::size_t kCached = 256;
constexpr std::size_t kKeepArgs = 1024;

struct Cache {
    std::vector<Invocation*> free;
    ~Cache();
};

// Set once the thread's cache is gone (thread exit): requests freed later are deleted.
thread_local bool t_gone = false;
thread_local Cache t_cache;

Cache::~Cache() {
    t_gone = true;
    for (Invocation* inv : free)
        delete inv;
}

}  // namespace

Invocation* new_invocation() {
    if (!t_gone) {
        std::vector<Invocation*>& f = t_cache.free;
        if (f.capacity() == 0) f.reserve(kCached);
        if (!f.empty()) {
            Invocation* inv = f.back();
            f.pop_back();
            return inv;
        }
    }
    return new Invocation;
}

void free_invocation(Invocation* inv) noexcept {
    if (!inv) return;
    if (!t_gone) {
        std::vector<Invocation*>& f = t_cache.free;
        if (f.size() < f.capacity()) {
            if (inv->args.capacity() > kKeepArgs)
                std::vector<char>().swap(inv->args);
            else
                inv->args.clear();
            f.push_back(inv);  // within the capacity: never allocates
            return;
        }
    }
    delete inv;
}

}  // namespace cascade::detail
