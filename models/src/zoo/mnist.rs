//! Small networks for 28×28 MNIST-style input (`[1, 28, 28]`).

use crate::export::{ConvGeom, ExportError, Value};

use super::net::Net;

/// LeNet-5 (ReLU, max-pool): conv 5×5 1→6 pad 2 → pool → conv 5×5 6→16 → pool → FC 400→120→84→classes.
pub(crate) fn lenet5(net: &mut Net, x: &Value, classes: usize) -> Result<Value, ExportError> {
    let y = net.conv("conv1", x, ConvGeom::dense(6, 5, 1, 2), true)?;
    let y = net.relu("relu1", &y)?;
    let y = net.graph().max_pool("pool1", &y, 2, 2, 0)?;
    let y = net.conv("conv2", &y, ConvGeom::dense(16, 5, 1, 0), true)?;
    let y = net.relu("relu2", &y)?;
    let y = net.graph().max_pool("pool2", &y, 2, 2, 0)?;
    let y = net.flatten("flatten", &y)?;
    hidden_fc_stack(net, &y, &[120, 84], classes)
}

/// LeNet-5 with BatchNormalization after both convs (bias-free) and both hidden FC layers, for
/// quantizers that assume normalised layer inputs (DoReFa's weights span [-1, 1] whatever their
/// fp32 scale, README "Collapsed runs").
pub(crate) fn lenet5_bn(net: &mut Net, x: &Value, classes: usize) -> Result<Value, ExportError> {
    let y = net.conv_bn("", "1", x, ConvGeom::dense(6, 5, 1, 2))?;
    let y = net.relu("relu1", &y)?;
    let y = net.graph().max_pool("pool1", &y, 2, 2, 0)?;
    let y = net.conv_bn("", "2", &y, ConvGeom::dense(16, 5, 1, 0))?;
    let y = net.relu("relu2", &y)?;
    let y = net.graph().max_pool("pool2", &y, 2, 2, 0)?;
    let mut y = net.flatten("flatten", &y)?;
    for (i, width) in [120, 84].into_iter().enumerate() {
        y = net.fc(&format!("fc{}", i + 1), &y, width)?;
        y = net.bn(&format!("bn_fc{}", i + 1), &y)?;
        y = net.relu(&format!("relu_fc{}", i + 1), &y)?;
    }
    net.head("fc3", &y, classes)
}

/// The LeNet-300-100 MLP: flatten → FC 784→300 → ReLU → FC 300→100 → ReLU → FC 100→classes.
pub(crate) fn mlp(net: &mut Net, x: &Value, classes: usize) -> Result<Value, ExportError> {
    let y = net.flatten("flatten", x)?;
    hidden_fc_stack(net, &y, &[300, 100], classes)
}

/// `fc1 → relu → fc2 → relu … → fc{k+1}` with the given hidden widths, then the classifier.
fn hidden_fc_stack(
    net: &mut Net,
    x: &Value,
    hidden: &[usize],
    classes: usize,
) -> Result<Value, ExportError> {
    let mut y = x.clone();
    for (i, &width) in hidden.iter().enumerate() {
        y = net.fc(&format!("fc{}", i + 1), &y, width)?;
        y = net.relu(&format!("relu_fc{}", i + 1), &y)?;
    }
    net.head(&format!("fc{}", hidden.len() + 1), &y, classes)
}
