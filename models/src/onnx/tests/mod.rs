//! Importer tests: a small ModelProto builder and the tests over models built with it.

mod import;
pub(crate) mod testutil;
