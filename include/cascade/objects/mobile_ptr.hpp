// mobile_ptr<T>: the global name of a mobile object (PREMA's mobile pointer). A small
// trivially copyable value, the object's home rank (where it was created, which always
// knows where it is) and an id unique on that rank. It stays valid wherever the object
// migrates, and travels as is inside active-message and async arguments and inside other
// objects.
//
//   cascade::mobile_ptr<Cell> p = objs.create<Cell>(args...);
//   am->send(dest, p);                  // any rank may invoke handlers on it
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace cascade {

/// The untyped global name of a mobile object: its home rank and its id there.
struct ObjectKey {
    std::int32_t home = -1;  ///< Rank that created the object (-1: no object).
    std::uint32_t pad = 0;   ///< Always 0 (keeps the bytes that travel defined).
    std::uint64_t id = 0;    ///< Id among the objects created on `home` (from 1).
    /// Same home and id.
    friend bool operator==(const ObjectKey&, const ObjectKey&) = default;
};

/// The global name of a mobile object of type T (see the top of this file). Made by
/// Objects::create; valid on every rank wherever the object migrates. std::hash is
/// specialized for it and for ObjectKey (keys of unordered containers).
template <class T>
class mobile_ptr {
  public:
    /// The object's type.
    using element_type = T;
    /// A null pointer (names no object; converts to false).
    mobile_ptr() = default;
    /// The object named by `k` (which must be an object of type T).
    explicit mobile_ptr(ObjectKey k) noexcept : key_(k) {}

    /// Rank that created the object; it always knows the object's location.
    int home() const noexcept { return key_.home; }
    /// Id of the object among those created on its home rank (from 1).
    std::uint64_t id() const noexcept { return key_.id; }
    /// False for a default-constructed pointer.
    explicit operator bool() const noexcept { return key_.home >= 0; }
    /// The untyped name (home rank and id).
    const ObjectKey& key() const noexcept { return key_; }
    /// Names the same object.
    friend bool operator==(const mobile_ptr&, const mobile_ptr&) = default;

  private:
    ObjectKey key_;
};

/// "<home>:<id>", the object's part of names in errors and traces.
inline std::string to_string(const ObjectKey& k) {
    return std::to_string(k.home) + ":" + std::to_string(k.id);
}

}  // namespace cascade

// Doxygen cannot place specializations of std::hash declared outside namespace std: they are
// left out of the reference (ObjectKey and mobile_ptr work as keys of unordered containers).
/// @cond STD_HASH
// Hash of an object's name.
template <>
struct std::hash<cascade::ObjectKey> {
    std::size_t operator()(const cascade::ObjectKey& k) const noexcept {
        return std::hash<std::uint64_t>{}(k.id * 0x9e3779b97f4a7c15ull ^
                                          static_cast<std::uint64_t>(k.home));
    }
};
// Hash of a mobile_ptr: the hash of its ObjectKey.
template <class T>
struct std::hash<cascade::mobile_ptr<T>> {
    std::size_t operator()(const cascade::mobile_ptr<T>& p) const noexcept {
        return std::hash<cascade::ObjectKey>{}(p.key());
    }
};
/// @endcond
