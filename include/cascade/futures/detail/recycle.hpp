// Big vectors are recycled. A value that travels as a body (a std::vector or std::string of
// kLargeBytes or more in a call, kBodyBytes or more in a mobile object) is received into memory
// that must first be sized, and std::vector zero-fills it; a fresh allocation of that size also
// takes page faults on first touch. Both cost about as much as the transfer itself. So the big
// vectors that calls, argument copies and result states drop go to a small pool per type, and the
// next body of a similar size is received into one of them: no fill, pages already mapped. The pool
// holds at most kSlots vectors and kPoolBytes per type, behind a mutex taken only for big values.
// It keeps only what receives ask for: each take() of a big size earns a credit (up to kSlots),
// and each vector added to the pool spends one. A program whose big vectors never meet a
// receive (local futures only) pools nothing and leaves that memory to the allocator, which
// reuses it for its next vectors; hoarding it cost a local quicksort 5 % in page faults.
#pragma once

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace cascade::detail {

// From this size on, vectors travel as bodies of remote calls (Futures::kLargeArg).
inline constexpr std::size_t kLargeBytes = std::size_t(128) << 10;
// From this size on, received vectors come from the Recycler and freed ones go back to it:
// the smallest vector any layer receives as a body (a mobile object's member: 8 KiB).
inline constexpr std::size_t kRecycleBytes = std::size_t(8) << 10;

template <class V>  // body_capable<V>: std::vector<E> or std::string, E trivially copyable
class Recycler {
    using E = typename V::value_type;
    static constexpr std::size_t kSlots = 8;
    static constexpr std::size_t kPoolBytes = std::size_t(256) << 20;

  public:
    // A V of n elements: a recycled one (contents unspecified, to be overwritten) if one of
    // n to 2n elements is pooled, else a new one.
    static V take(std::size_t n) {
        if (n * sizeof(E) >= kRecycleBytes) {
            Pool& p = pool();
            std::lock_guard<std::mutex> g(p.m);
            if (p.credits < kSlots) ++p.credits;
            for (std::size_t i = 0; i < p.v.size(); ++i) {
                const std::size_t have = p.v[i].size();
                if (have >= n && have / 2 <= n) {
                    V v = std::move(p.v[i]);
                    if (i + 1 != p.v.size()) p.v[i] = std::move(p.v.back());
                    p.v.pop_back();
                    p.bytes -= have * sizeof(E);
                    v.resize(n);  // shrinks: nothing is written
                    return v;
                }
            }
        }
        return V(n, E{});
    }
    // Copies x into a (possibly recycled) V.
    static V copy(const V& x) {
        V v = take(x.size());
        std::copy(x.begin(), x.end(), v.begin());
        return v;
    }
    // Keeps v's memory for a later take() if it is big and takes asked for it (a credit, see
    // above) or it replaces a smaller pooled one (v is left empty), else leaves v alone. A full
    // pool gives up its smallest vector for a bigger one: the bigger the vector, the more a
    // recycled one saves.
    static void give(V& v) noexcept {
        const std::size_t bytes = v.size() * sizeof(E);
        if (bytes < kRecycleBytes) return;
        V old;  // freed after the lock is released
        Pool& p = pool();
        std::lock_guard<std::mutex> g(p.m);
        if (p.v.size() == kSlots) {
            std::size_t s = 0;
            for (std::size_t i = 1; i < p.v.size(); ++i)
                if (p.v[i].size() < p.v[s].size()) s = i;
            if (p.v[s].size() >= v.size()) return;
            p.bytes -= p.v[s].size() * sizeof(E);
            old = std::move(p.v[s]);
            p.v[s] = std::move(p.v.back());
            p.v.pop_back();
        } else if (p.credits == 0) {
            return;
        } else {
            --p.credits;
        }
        if (p.bytes + bytes <= kPoolBytes) {
            p.bytes += bytes;
            p.v.push_back(std::move(v));  // capacity reserved: does not allocate
        }
    }
    // Frees every pooled vector and forgets the credits (tests).
    static void clear() {
        std::vector<V> gone;
        Pool& p = pool();
        std::lock_guard<std::mutex> g(p.m);
        gone.swap(p.v);
        p.v.reserve(kSlots);
        p.bytes = 0;
        p.credits = 0;
    }
    // Vectors pooled now (tests).
    static std::size_t pooled() {
        Pool& p = pool();
        std::lock_guard<std::mutex> g(p.m);
        return p.v.size();
    }

  private:
    struct Pool {
        std::mutex m;
        std::vector<V> v;
        std::size_t bytes = 0;
        std::size_t credits = 0;  // takes of big sizes not yet matched by a vector pooled
        Pool() { v.reserve(kSlots); }
    };
    // Never destroyed: states may still die during static destruction.
    static Pool& pool() {
        static Pool* p = new Pool;
        return *p;
    }
};

}  // namespace cascade::detail
