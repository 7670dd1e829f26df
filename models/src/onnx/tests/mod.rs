//! Importer tests: a small ModelProto builder and the tests over models built with it.

mod attrs;
mod external;
mod fold;
mod ids;
mod import;
mod ops;
mod scale;
mod sequence;
pub(crate) mod testutil;
