// Wire format of everything that travels between ranks (active-message arguments, async
// arguments and results, mobile objects). Encodings, chosen per type:
//   view<T>                      count + elements; decoded as a view into the message
//   user types with a codec      whatever their serialize() writes (see codec.hpp); a codec
//                                wins over the rules below
//   std::string, std::vector<E>  count + elements in one block (E trivially copyable)
//   std::vector<E>, other E      count + each element in turn (E any type that travels)
//   trivially copyable T         its bytes
// Anything else fails to compile, naming the type (wire::no_codec<T>) and the two ways to
// give it a codec. Decoding is bounds-checked: a truncated or malformed message raises
// WireError instead of reading past the buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cascade/comm/codec.hpp"
#include "cascade/comm/view.hpp"

namespace cascade {

class WireError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

namespace wire {

template <class T>
struct is_view : std::false_type {};
template <class T>
struct is_view<view<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

class Sizer;
class Writer;
class Reader;

// A user codec: a cascade::codec<T> specialization, or a member serialize(Archive&).
template <class T>
concept has_codec = requires(Sizer& a, T& x) {
    codec<T>::serialize(a, x);
};
template <class T>
concept has_member_serialize = requires(Sizer& a, T& x) {
    x.serialize(a);
};
template <class T>
constexpr bool custom = has_codec<T> || has_member_serialize<T>;

enum class Kind { none, view, custom, bulk, elements, raw };

// What may travel: trivially copyable values, sequences, types with a codec. A view is decoded in
// place (it points into the message, whose elements are 8-byte aligned), so its elements
// need no more than 8-byte alignment.
template <class T>
constexpr Kind kind_of() {
    if constexpr (is_view<T>::value) {
        using E = std::remove_cv_t<typename T::value_type>;
        if constexpr (std::is_trivially_copyable_v<E> && alignof(E) <= 8)
            return Kind::view;
        else
            return Kind::none;
    } else if constexpr (custom<T>) {
        return Kind::custom;
    } else if constexpr (std::is_same_v<T, std::string>) {
        return Kind::bulk;
    } else if constexpr (is_vector<T>::value) {
        using E = typename T::value_type;
        if constexpr (std::is_trivially_copyable_v<E> && !custom<E>)
            return Kind::bulk;
        else if constexpr (kind_of<E>() != Kind::none && kind_of<E>() != Kind::view)
            return Kind::elements;
        else
            return Kind::none;
    } else if constexpr (std::is_trivially_copyable_v<T>) {
        return Kind::raw;
    } else {
        return Kind::none;
    }
}

// True when T can travel (no diagnostic; see `require` for the one that explains).
template <class T>
constexpr bool supported = kind_of<T>() != Kind::none;

template <class T>
constexpr bool dependent_false = false;

// Instantiated for a type that cannot travel: the compiler names T here.
template <class T>
struct no_codec {
    static_assert(dependent_false<T>,
                  "cascade: this type (the T of cascade::wire::no_codec<T> above) cannot travel "
                  "between ranks: it is not trivially copyable and has no codec. Give it a "
                  "member `template <class Archive> void serialize(Archive& ar) { ar(member1, "
                  "member2); }` or specialize `cascade::codec<T>` with `template <class Archive> "
                  "static void serialize(Archive& ar, T& x)` (see cascade/comm/codec.hpp)");
};
// `static_assert(wire::require<T>)` where T must travel: fails with no_codec<T>'s message.
template <class T>
constexpr bool require = [] {
    if constexpr (!supported<T>) (void)sizeof(no_codec<T>);
    return supported<T>;
}();

template <class T>
void run_codec(auto& ar, T& x) {
    if constexpr (has_codec<T>)
        codec<T>::serialize(ar, x);
    else
        x.serialize(ar);
}

// Sequence elements start at an 8-byte aligned address (frames are 8-byte aligned and
// buffers come from operator new), so views of doubles are read in place, aligned.
inline std::size_t pad8(const char* p) noexcept {
    return (8 - (reinterpret_cast<std::uintptr_t>(p) & 7)) & 7;
}

template <class T>
std::size_t size_of(const T& x);

/// Archive that adds up an upper bound of the bytes its arguments take (what a codec's
/// serialize() sees while a message is being sized).
class Sizer {
  public:
    /// False: serialize() is writing (here: measuring) values, not reading them.
    static constexpr bool loading = false;
    /// Adds the wire size bounds of `xs...`.
    template <class... Xs>
    void operator()(const Xs&... xs) {
        ((n_ += size_of(xs)), ...);
    }
    /// The bytes added up so far.
    std::size_t bytes() const noexcept { return n_; }

  private:
    std::size_t n_ = 0;
};

// Upper bound of the bytes a value takes on the wire.
template <class T>
std::size_t size_of(const T& x) {
    constexpr Kind k = kind_of<T>();
    static_assert(require<T>);
    if constexpr (k == Kind::view || k == Kind::bulk) {
        return sizeof(std::uint64_t) + 7 + x.size() * sizeof(*x.data());
    } else if constexpr (k == Kind::custom) {
        Sizer s;
        run_codec(s, const_cast<T&>(x));  // serialize() only reads x here
        return s.bytes();
    } else if constexpr (k == Kind::elements) {
        std::size_t n = sizeof(std::uint64_t);
        for (const auto& e : x)
            n += size_of(e);
        return n;
    } else {
        return sizeof(T);
    }
}

/// Archive that writes its arguments at `out` (which holds at least size_of of them).
class Writer {
  public:
    /// False: serialize() is writing values.
    static constexpr bool loading = false;
    /// Writes from `out` on (8-byte aligned, large enough: see Sizer).
    explicit Writer(char* out) : p_(out) {}
    /// Writes `xs...` in order.
    template <class... Xs>
    void operator()(const Xs&... xs) {
        (put(xs), ...);
    }
    /// Writes one value in its wire format (raw bytes, a counted sequence, or its codec).
    template <class T>
    void put(const T& x) {
        constexpr Kind k = kind_of<T>();
        static_assert(require<T>);
        if constexpr (k == Kind::view || k == Kind::bulk) {
            std::uint64_t n = x.size();
            std::memcpy(p_, &n, sizeof n);
            p_ += sizeof n;
            const std::size_t pad = pad8(p_);
            std::memset(p_, 0, pad);
            p_ += pad;
            const std::size_t bytes = n * sizeof(*x.data());
            if (bytes) std::memcpy(p_, x.data(), bytes);
            p_ += bytes;
        } else if constexpr (k == Kind::custom) {
            run_codec(*this, const_cast<T&>(x));  // serialize() only reads x here
        } else if constexpr (k == Kind::elements) {
            put(static_cast<std::uint64_t>(x.size()));
            for (const auto& e : x)
                put(e);
        } else {
            std::memcpy(p_, &x, sizeof(T));
            p_ += sizeof(T);
        }
    }
    /// Where the next byte goes: the end of what was written.
    char* position() const noexcept { return p_; }

  private:
    char* p_;
};

/// Archive that reads values back, in the order they were written. Throws WireError on
/// malformed or truncated input.
class Reader {
  public:
    /// True: serialize() is reading values.
    static constexpr bool loading = true;
    /// Reads the `size` bytes from `begin` (8-byte aligned, as frames are).
    Reader(const char* begin, std::size_t size) : p_(begin), end_(begin + size) {}

    /// Reads into `xs...` in order.
    template <class... Xs>
    void operator()(Xs&... xs) {
        (read_into(xs), ...);
    }
    /// Reads one value into `x` (a codec type is decoded in place).
    template <class T>
    void read_into(T& x) {
        if constexpr (kind_of<T>() == Kind::custom)
            run_codec(*this, x);
        else
            x = get<T>();
    }

    /// Reads and returns one value of type T; a view<E> points into the buffer.
    template <class T>
    T get() {
        constexpr Kind k = kind_of<T>();
        static_assert(require<T>);
        if constexpr (k == Kind::view) {
            using E = typename T::value_type;
            std::uint64_t n = get<std::uint64_t>();
            skip_padding();
            const char* bytes = take(n, sizeof(std::remove_cv_t<E>));
            return T(reinterpret_cast<E*>(const_cast<char*>(bytes)), n);
        } else if constexpr (k == Kind::bulk) {
            using E = typename T::value_type;
            std::uint64_t n = get<std::uint64_t>();
            skip_padding();
            const char* bytes = take(n, sizeof(E));
            if constexpr (alignof(E) <= 8) {
                // Elements start 8-byte aligned: copy them in one pass (no zero-fill first).
                const E* first = reinterpret_cast<const E*>(bytes);
                return T(first, first + n);
            } else {
                T out(n, E{});
                if (n) std::memcpy(out.data(), bytes, n * sizeof(E));
                return out;
            }
        } else if constexpr (k == Kind::custom) {
            static_assert(std::is_default_constructible_v<T>,
                          "cascade: a type with a codec is decoded into a default-constructed "
                          "value: give it a default constructor");
            T x{};
            run_codec(*this, x);
            return x;
        } else if constexpr (k == Kind::elements) {
            const std::uint64_t n = get<std::uint64_t>();
            if (n > remaining())  // every element takes at least one byte
                throw WireError("truncated message: " + std::to_string(n) + " elements, " +
                                std::to_string(remaining()) + " bytes left");
            T out;
            out.reserve(static_cast<std::size_t>(n));
            for (std::uint64_t i = 0; i < n; ++i)
                out.push_back(get<typename T::value_type>());
            return out;
        } else if constexpr (std::is_same_v<T, bool>) {
            // Any byte other than 0 and 1 is not a bool: reading it as one is undefined.
            const unsigned char b = static_cast<unsigned char>(*take(1, 1));
            if (b > 1) throw WireError("malformed bool: byte " + std::to_string(b));
            return b == 1;
        } else {
            const char* bytes = take(1, sizeof(T));
            T x;
            std::memcpy(&x, bytes, sizeof(T));
            return x;
        }
    }
    /// Throws WireError unless every byte was consumed: a message longer than its arguments
    /// is as malformed as a shorter one.
    void expect_end() const {
        if (p_ != end_)
            throw WireError(std::to_string(remaining()) + " byte(s) left over after the arguments");
    }
    /// Bytes not read yet.
    std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }

  private:
    // The writer zeroes the padding before sequence elements; anything else is malformed.
    void skip_padding() {
        const std::size_t pad = pad8(p_);
        const char* at = take(1, pad);
        for (std::size_t i = 0; i < pad; ++i)
            if (at[i] != 0) throw WireError("non-zero padding");
    }
    // Small enough to inline into every read (the element size is then a constant); the
    // error is built out of line.
    const char* take(std::uint64_t n, std::size_t elem) {
        if (elem != 0 && n > remaining() / elem) [[unlikely]]
            truncated(n, elem, remaining());
        const char* at = p_;
        p_ += n * elem;
        return at;
    }
    [[noreturn, gnu::cold, gnu::noinline]] static void truncated(std::uint64_t n, std::size_t elem,
                                                                 std::size_t left) {
        throw WireError("truncated message: need " + std::to_string(n) + " x " +
                        std::to_string(elem) + " bytes, " + std::to_string(left) + " left");
    }
    const char* p_;
    const char* end_;
};

// A 32-bit hash of the name and argument types, carried in every message so that a receiver
// whose AM of the same id is another function (other types, or another name) fails loudly
// instead of misreading bytes.
template <class... Ps>
std::string_view type_names() {
    return __PRETTY_FUNCTION__;
}
inline std::uint32_t hash_name(std::string_view s) noexcept {  // FNV-1a
    std::uint32_t h = 2166136261u;
    for (char c : s)
        h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
    return h;
}
template <class... Ps>
std::uint32_t signature() {
    return hash_name(type_names<Ps...>());
}
// The signature of a registered function: its name, then its types.
inline std::uint32_t signature_of(std::string_view name, std::string_view types) noexcept {
    std::uint32_t h = hash_name(name);
    h = (h ^ 0xffu) * 16777619u;  // separator: ("ab", "c") and ("a", "bc") differ
    for (char c : types)
        h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
    return h;
}

// Decodes Ps... from a Reader into a tuple, in order.
template <class... Ps>
std::tuple<Ps...> decode(Reader& r) {
    return std::tuple<Ps...>{r.get<Ps>()...};  // braced init: evaluated left to right
}
// Decodes exactly Ps...: throws WireError if bytes are left over.
template <class... Ps>
std::tuple<Ps...> decode_all(Reader& r) {
    auto t = decode<Ps...>(r);
    r.expect_end();
    return t;
}

}  // namespace wire
}  // namespace cascade
