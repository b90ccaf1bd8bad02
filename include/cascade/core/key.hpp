// Task keys: hashing and printing for the key types a Taskflow<K> accepts (integers,
// pointers, enums, std::pair / std::tuple / std::array of those, or anything with std::hash).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cascade {

namespace detail {

inline std::uint64_t mix64(std::uint64_t x) noexcept {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

template <class T>
struct is_tuple_like : std::false_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};
template <class T, std::size_t N>
struct is_tuple_like<std::array<T, N>> : std::true_type {};

template <class T>
concept Streamable = requires(std::ostream& os, const T& t) {
    os << t;
};

}  // namespace detail

template <class K>
struct KeyHash;

namespace detail {

// A component of a tuple-like key as 64 bits: integers and pointers as they are, anything
// else through its own KeyHash.
template <class T>
std::uint64_t component(const T& x) noexcept {
    if constexpr (std::is_integral_v<T> || std::is_enum_v<T>)
        return static_cast<std::uint64_t>(x);
    else if constexpr (std::is_pointer_v<T>)
        return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(x));
    else
        return KeyHash<T>{}(x);
}

}  // namespace detail

/// The hash the promise table uses for keys of type K (integers, pointers, enums, tuples,
/// pairs and arrays of them, else std::hash<K>).
template <class K>
struct KeyHash {
    /// The hash of `k` (mixed, so consecutive integers spread over the shards).
    std::size_t operator()(const K& k) const noexcept {
        if constexpr (std::is_integral_v<K> || std::is_enum_v<K>) {
            return static_cast<std::size_t>(detail::mix64(static_cast<std::uint64_t>(k)));
        } else if constexpr (std::is_pointer_v<K>) {
            return static_cast<std::size_t>(
                detail::mix64(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(k))));
        } else if constexpr (detail::is_tuple_like<K>::value) {
            // Combine the raw components cheaply, then mix once: keys are hashed on every
            // fulfill_promise, so this is on the hot path.
            std::uint64_t h = 0x9e3779b97f4a7c15ULL;
            std::apply(
                [&](const auto&... xs) {
                    ((h = (h ^ detail::component(xs)) * 0x100000001b3ULL), ...);
                },
                k);
            return static_cast<std::size_t>(detail::mix64(h));
        } else {
            return std::hash<K>{}(k);
        }
    }
};

/// A key as text, as task names show it: `7`, `(1, 2, 3)`, `0x7f...`.
///
/// ```cpp
/// std::string s = cascade::key_to_string(std::tuple<int, int>{1, 2});  // "(1, 2)"
/// ```
template <class K>
std::string key_to_string(const K& k) {
    if constexpr (std::is_same_v<K, bool>) {
        return k ? "true" : "false";
    } else if constexpr (std::is_integral_v<K>) {
        return std::to_string(k);
    } else if constexpr (std::is_enum_v<K>) {
        return std::to_string(static_cast<std::underlying_type_t<K>>(k));
    } else if constexpr (std::is_pointer_v<K>) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%p", static_cast<const void*>(k));
        return buf;
    } else if constexpr (detail::is_tuple_like<K>::value) {
        std::string s = "(";
        bool first = true;
        std::apply(
            [&](const auto&... xs) {
                ((s += (first ? "" : ", ") + key_to_string(xs), first = false), ...);
            },
            k);
        return s + ")";
    } else if constexpr (detail::Streamable<K>) {
        std::ostringstream os;
        os << k;
        return os.str();
    } else {
        return "<key>";
    }
}

}  // namespace cascade
