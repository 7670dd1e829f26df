//! Importer tests: a small ModelProto builder and the tests over models built with it.

mod attrs;
mod import;
mod sequence;
pub(crate) mod testutil;
