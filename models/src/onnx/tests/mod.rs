//! Importer tests: a small ModelProto builder and the tests over models built with it.

mod import;
mod sequence;
pub(crate) mod testutil;
