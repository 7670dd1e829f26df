//! The cptsim trainer: tensors, layers with backward passes, quantizers, policies, datasets.
