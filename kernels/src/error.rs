//! The kernels' error type: a shape or a setting they cannot take, named by the operation that
//! rejected it. The network's error type (`cptsim_nn::SimError`) takes each variant as its own
//! variant of the same name, with the same message.

/// Errors raised by the kernels.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// Operands whose shapes do not fit the operation.
    #[error("layer `{layer}`: {msg}")]
    Shape {
        /// Name of the operation (or the layer it runs for) that rejected the operands.
        layer: String,
        /// What was expected and what arrived.
        msg: String,
    },
    /// A setting (an environment variable, a requested vector path) is out of range.
    #[error("invalid {what}: {msg}")]
    Invalid {
        /// The setting at fault.
        what: String,
        /// Why it is rejected.
        msg: String,
    },
}

impl KernelError {
    /// Shorthand for a [`KernelError::Shape`] error.
    pub fn shape(layer: &str, msg: impl Into<String>) -> Self {
        KernelError::Shape {
            layer: layer.to_string(),
            msg: msg.into(),
        }
    }
}

/// Result alias of the kernels.
pub type Result<T, E = KernelError> = std::result::Result<T, E>;
