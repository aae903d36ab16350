//! Zero-copy wire views and `Repr` types for the headers the programs parse.
