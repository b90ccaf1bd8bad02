// The one hook through which a user type travels between ranks: as an active-message
// argument, an async argument or result, and as a mobile object when it migrates.
//
// Trivially copyable types, std::string and std::vector need nothing. Any other type gets
// either a member
//
//   struct Particle {
//       std::vector<double> x;
//       std::string tag;
//       template <class Archive>
//       void serialize(Archive& ar) { ar(x, tag); }   // every member that must travel
//   };
//
// or, for a type you cannot change, a specialization of cascade::codec:
//
//   template <>
//   struct cascade::codec<Tile> {
//       template <class Archive>
//       static void serialize(Archive& ar, Tile& t) { ar(t.rows, t.cols, t.data); }
//   };
//
// The same function writes and reads (`Archive::loading` tells which, for the rare type that
// must do something different on each side, e.g. resize before reading). Members are any
// type that can travel, user types with their own codec included. A decoded value starts
// default-constructed, then serialize() fills it.
#pragma once

namespace cascade {

// Specialize with `template <class Archive> static void serialize(Archive& ar, T& x)`.
template <class T>
struct codec {};

}  // namespace cascade
