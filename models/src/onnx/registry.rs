//! The op-type → handler table of the importer. Each op family in [`super::ops`] registers its
//! own op types into it ([`super::ops::registry`] builds the table once, on first use).

use std::collections::HashMap;

use super::context::Importer;
use super::node::NodeView;
use super::value::Val;
use crate::error::ModelError;

/// A handler reads one node and returns what its first output stands for.
pub type Handler = fn(&mut Importer, &NodeView) -> Result<Val, ModelError>;

/// Op types of the default ONNX domain and their handlers, in registration order.
#[derive(Default)]
pub struct Registry {
    handlers: HashMap<&'static str, Handler>,
    order: Vec<&'static str>,
    /// Op types registered more than once (none, in a correct build; see the tests).
    duplicates: Vec<&'static str>,
}

impl Registry {
    /// Registers `handler` for `op_type`. A second registration of the same op type replaces
    /// the first and is recorded (a test checks that no two families claim one op type).
    pub fn insert(&mut self, op_type: &'static str, handler: Handler) {
        if self.handlers.insert(op_type, handler).is_some() {
            self.duplicates.push(op_type);
        } else {
            self.order.push(op_type);
        }
    }

    /// The handler of `op_type`.
    pub fn get(&self, op_type: &str) -> Option<Handler> {
        self.handlers.get(op_type).copied()
    }

    /// Op types registered more than once.
    pub fn duplicates(&self) -> &[&'static str] {
        &self.duplicates
    }

    /// The registered op types, in registration order.
    pub fn op_types(&self) -> &[&'static str] {
        &self.order
    }
}
