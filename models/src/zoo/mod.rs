//! The built-in model zoo (spec §9): CIFAR ResNets and MobileNetV2, ImageNet ResNets and small
//! MNIST networks, built as ONNX models with seeded weights.
//!
//! Every model is produced by the project's ONNX export ([`crate::export`]); the CLI's
//! `zoo export` writes it to a file and `zoo:NAME` on the command line refers to it.

mod bf;
pub mod init;
mod mnist;
mod mobilenet;
mod net;
mod resnet;
pub mod seq;

use onnx_protobuf::ModelProto;

use crate::export::{ExportError, NodeRecord};
pub use bf::bits as bf_bits;
use net::Net;
use resnet::{cifar_stages, Block, ResNet, Stem};

/// Largest class count `build` accepts (guards against absurd allocations).
pub const MAX_CLASSES: usize = 100_000;

/// Errors of the zoo.
#[derive(Debug, thiserror::Error)]
pub enum ZooError {
    /// The name is not a zoo model.
    #[error("unknown zoo model `{name}`; valid names: {}, {}", names().join(", "), seq_names().join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// A cost-only sequence model ([`seq`]) has no ONNX form.
    #[error("zoo model `{name}` is cost-only (built straight into the IR with zero weights): it has no ONNX export and does not train")]
    CostOnly {
        /// The model.
        name: String,
    },
    /// `--seq-len` was given for an image model.
    #[error("--seq-len {seq_len}: zoo:{name} is an image model with no sequence axis")]
    NoSequence {
        /// The model.
        name: String,
        /// The length asked for.
        seq_len: usize,
    },
    /// The class count is out of range.
    #[error("zoo model `{name}`: classes must be between 1 and {MAX_CLASSES}, got {classes}")]
    Classes {
        /// The model.
        name: String,
        /// The class count asked for.
        classes: usize,
    },
    /// The graph builder rejected the model (a bug in the model definition).
    #[error("building zoo model `{name}`: {cause}")]
    Build {
        /// The model.
        name: String,
        /// What the builder reported.
        cause: ExportError,
    },
}

/// Which network an entry builds.
#[derive(Clone, Copy, Debug)]
enum Arch {
    ResNet(ResNet),
    MobileNetV2,
    LeNet5,
    LeNet5Bn,
    Mlp,
    /// A Bit Fusion paper benchmark (`bf-`).
    Bf(bf::Bench),
}

/// One zoo model: its name, one-line description, per-sample input shape and default classes.
struct Entry {
    name: &'static str,
    about: &'static str,
    input: [usize; 3],
    classes: usize,
    arch: Arch,
}

const CIFAR: [usize; 3] = [3, 32, 32];
const IMAGENET: [usize; 3] = [3, 224, 224];
const MNIST: [usize; 3] = [1, 28, 28];

const fn cifar_resnet(
    name: &'static str,
    about: &'static str,
    stages: &'static [(usize, usize, usize)],
) -> Entry {
    Entry {
        name,
        about,
        input: CIFAR,
        classes: 100,
        arch: Arch::ResNet(ResNet {
            stem: Stem::Cifar,
            block: Block::Basic,
            stages,
        }),
    }
}

const fn imagenet_resnet(
    name: &'static str,
    about: &'static str,
    block: Block,
    stages: &'static [(usize, usize, usize)],
) -> Entry {
    Entry {
        name,
        about,
        input: IMAGENET,
        classes: 1000,
        arch: Arch::ResNet(ResNet {
            stem: Stem::ImageNet,
            block,
            stages,
        }),
    }
}

const fn bf(
    name: &'static str,
    about: &'static str,
    input: [usize; 3],
    classes: usize,
    bench: bf::Bench,
) -> Entry {
    Entry {
        name,
        about,
        input,
        classes,
        arch: Arch::Bf(bench),
    }
}

const ENTRIES: [Entry; 23] = [
    cifar_resnet(
        "resnet20",
        "CIFAR ResNet-20: 6n+2 basic blocks, n=3, 1x1 projection shortcuts",
        &cifar_stages(3),
    ),
    cifar_resnet(
        "resnet38",
        "CIFAR ResNet-38: 6n+2 basic blocks, n=6, 1x1 projection shortcuts",
        &cifar_stages(6),
    ),
    cifar_resnet(
        "resnet56",
        "CIFAR ResNet-56: 6n+2 basic blocks, n=9, 1x1 projection shortcuts",
        &cifar_stages(9),
    ),
    cifar_resnet(
        "resnet74",
        "CIFAR ResNet-74: 6n+2 basic blocks, n=12, 1x1 projection shortcuts",
        &cifar_stages(12),
    ),
    cifar_resnet(
        "resnet110",
        "CIFAR ResNet-110: 6n+2 basic blocks, n=18, 1x1 projection shortcuts",
        &cifar_stages(18),
    ),
    cifar_resnet(
        "resnet152",
        "CIFAR ResNet-152: 6n+2 basic blocks, n=25, 1x1 projection shortcuts",
        &cifar_stages(25),
    ),
    cifar_resnet(
        "resnet164",
        "CIFAR ResNet-164 as in the CPT cost numbers: 6n+2 basic blocks, n=27",
        &cifar_stages(27),
    ),
    Entry {
        name: "resnet164-bottleneck",
        about: "CIFAR ResNet-164 of He et al.: 9n+2 bottleneck blocks, n=18, widths 64/128/256",
        input: CIFAR,
        classes: 100,
        arch: Arch::ResNet(ResNet {
            stem: Stem::Cifar,
            block: Block::Bottleneck,
            stages: &cifar_stages(18),
        }),
    },
    Entry {
        name: "mobilenetv2",
        about: "CIFAR MobileNetV2 (kuangliu-style): stride-1 stem and stage 2, plain ReLU",
        input: CIFAR,
        classes: 100,
        arch: Arch::MobileNetV2,
    },
    imagenet_resnet(
        "resnet18",
        "ImageNet ResNet-18 (torchvision topology), 224x224 input",
        Block::Basic,
        &[(64, 2, 1), (128, 2, 2), (256, 2, 2), (512, 2, 2)],
    ),
    imagenet_resnet(
        "resnet34",
        "ImageNet ResNet-34 (torchvision topology), 224x224 input",
        Block::Basic,
        &[(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)],
    ),
    imagenet_resnet(
        "resnet50",
        "ImageNet ResNet-50 (torchvision topology, stride in the 3x3 conv), 224x224 input",
        Block::Bottleneck,
        &[(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)],
    ),
    Entry {
        name: "lenet5",
        about: "LeNet-5 for 28x28 MNIST: two 5x5 convs with ReLU and max-pool, FC 120-84",
        input: MNIST,
        classes: 10,
        arch: Arch::LeNet5,
    },
    Entry {
        name: "lenet5-bn",
        about: "LeNet-5 with BatchNorm after each conv and hidden FC (for DoReFa, whose weights span [-1, 1])",
        input: MNIST,
        classes: 10,
        arch: Arch::LeNet5Bn,
    },
    Entry {
        name: "mlp",
        about: "LeNet-300-100 MLP for 28x28 MNIST: FC 784-300-100 with ReLU",
        input: MNIST,
        classes: 10,
        arch: Arch::Mlp,
    },
    bf("bf-alexnet", "Bit Fusion benchmark: two-tower AlexNet, 227x227, 8/4/8-bit (per-layer bits: zoo::bf_bits)", [3, 227, 227], 1000, bf::Bench::AlexNet),
    bf("bf-svhn", "Bit Fusion benchmark: SVHN QNN, binary after the 8-bit input", CIFAR, 10, bf::Bench::Svhn),
    bf("bf-cifar10", "Bit Fusion benchmark: CIFAR-10 QNN, 2-bit after the 8-bit first layer", CIFAR, 10, bf::Bench::Cifar10),
    bf("bf-lenet5", "Bit Fusion benchmark: LeNet-5 TWN, 32x32, 2-bit", [1, 32, 32], 10, bf::Bench::LeNet5),
    bf("bf-vgg7", "Bit Fusion benchmark: VGG-7 TWN (two towers), CIFAR-10, 2-bit", CIFAR, 1024, bf::Bench::Vgg7),
    bf("bf-resnet18", "Bit Fusion benchmark: ResNet-18 TWN as its authors list it, 224x224, 4-bit", IMAGENET, 1000, bf::Bench::ResNet18),
    bf("bf-rnn", "Bit Fusion benchmark: RNN (PTB) step, one 4096x4096 matmul, 4-bit", [4096, 1, 1], 4096, bf::Bench::Rnn),
    bf("bf-lstm", "Bit Fusion benchmark: LSTM (PTB) step, one 3600x3600 matmul, 4-bit", [3600, 1, 1], 3600, bf::Bench::Lstm),
];

const fn entry_names<const N: usize>(entries: &[Entry; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = entries[i].name;
        i += 1;
    }
    out
}

static NAMES: [&str; ENTRIES.len()] = entry_names(&ENTRIES);

fn entry(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.name == name)
}

/// Names of the cost-only sequence models and vision transformer ([`seq`]).
pub fn seq_names() -> Vec<&'static str> {
    seq::ENTRIES.iter().map(|e| e.name).collect()
}

/// Names of all zoo models with an ONNX form, in listing order.
pub fn names() -> &'static [&'static str] {
    &NAMES
}

/// One-line description of a zoo model.
pub fn describe(name: &str) -> Option<&'static str> {
    entry(name).map(|e| e.about)
}

/// Default number of classes: 100 for CIFAR models, 1000 for ImageNet, 10 for MNIST.
pub fn default_classes(name: &str) -> Option<usize> {
    entry(name).map(|e| e.classes)
}

/// Per-sample input shape `[C, H, W]`.
pub fn input_shape(name: &str) -> Option<[usize; 3]> {
    entry(name).map(|e| e.input)
}

/// Builds zoo model `name` with `classes` outputs (default per [`default_classes`]) and weights
/// drawn from `seed` by the initialisation rule ([`init`]). Same arguments → same bytes.
pub fn build(name: &str, classes: Option<usize>, seed: u64) -> Result<ModelProto, ZooError> {
    build_recorded(name, classes, seed).map(|(model, _)| model)
}

/// [`build`], also returning the builder's record of every node (shapes, params, MACs).
pub fn build_recorded(
    name: &str,
    classes: Option<usize>,
    seed: u64,
) -> Result<(ModelProto, Vec<NodeRecord>), ZooError> {
    build_with(name, classes, Some(seed))
}

/// Zoo model `name` for costing: the graph of [`build`] with zero weights, its conv and linear
/// weights stored as dims without values (import it with
/// [`crate::onnx::ImportOptions::shapes_only`]). No weights are drawn, so it takes a fraction of
/// the time and memory (ResNet-50: no 100 MB of weights).
pub fn build_shapes(name: &str, classes: Option<usize>) -> Result<ModelProto, ZooError> {
    build_with(name, classes, None).map(|(model, _)| model)
}

/// The zoo builder: weights drawn from `seed`, or none (shapes only) without one.
fn build_with(
    name: &str,
    classes: Option<usize>,
    seed: Option<u64>,
) -> Result<(ModelProto, Vec<NodeRecord>), ZooError> {
    if seq::entry(name).is_some() {
        return Err(ZooError::CostOnly {
            name: name.to_string(),
        });
    }
    let e = entry(name).ok_or_else(|| ZooError::Unknown {
        name: name.to_string(),
    })?;
    let classes = classes.unwrap_or(e.classes);
    if classes == 0 || classes > MAX_CLASSES {
        return Err(ZooError::Classes {
            name: name.to_string(),
            classes,
        });
    }
    let weights = match seed {
        Some(seed) => format!("seed {seed}"),
        None => "shapes only, no weight values".to_string(),
    };
    let doc = format!(
        "cptsim zoo model {name}: {} ({classes} classes, {weights})",
        e.about
    );
    let built = (|| {
        let mut net = match seed {
            Some(seed) => Net::new(name, seed),
            None => Net::shapes_only(name),
        };
        let x = net.input(&e.input)?;
        let logits = match e.arch {
            Arch::ResNet(resnet) => resnet.build(&mut net, &x, classes)?,
            Arch::MobileNetV2 => mobilenet::build(&mut net, &x, classes)?,
            Arch::LeNet5 => mnist::lenet5(&mut net, &x, classes)?,
            Arch::LeNet5Bn => mnist::lenet5_bn(&mut net, &x, classes)?,
            Arch::Mlp => mnist::mlp(&mut net, &x, classes)?,
            Arch::Bf(bench) => bf::build(bench, &mut net, &x, classes)?,
        };
        net.finish(&logits, &doc)
    })();
    built.map_err(|cause| ZooError::Build {
        name: name.to_string(),
        cause,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_protobuf::Message;

    /// (model, conv+FC MACs, BN output elements, Conv nodes, Gemm nodes, BN nodes) per sample.
    /// MACs and BN elements are spec §2.3's table; resnet56 (n = 9) lies on the same line in n as
    /// the table's basic-block ResNets (+14 155 776 MACs and +57 344 BN elements per unit of n);
    /// resnet164-bottleneck, lenet5 and mlp are counted by hand from their definitions.
    const EXPECTED: [(&str, u64, u64, usize, usize, usize); 23] = [
        ("resnet20", 40_818_944, 200_704, 21, 1, 21),
        ("resnet38", 83_286_272, 372_736, 39, 1, 39),
        ("resnet56", 125_753_600, 544_768, 57, 1, 57),
        ("resnet74", 168_220_928, 716_800, 75, 1, 75),
        ("resnet110", 253_155_584, 1_060_864, 111, 1, 111),
        ("resnet152", 352_246_016, 1_462_272, 153, 1, 153),
        ("resnet164", 380_557_568, 1_576_960, 165, 1, 165),
        ("resnet164-bottleneck", 247_669_760, 3_264_512, 166, 1, 166),
        ("mobilenetv2", 91_270_144, 1_724_928, 57, 1, 57),
        ("resnet18", 1_814_073_344, 2_483_712, 20, 1, 20),
        ("resnet34", 3_663_761_408, 3_738_112, 36, 1, 36),
        ("resnet50", 4_089_184_256, 11_113_984, 53, 1, 53),
        // 6·25·28² + 16·6·25·10² + 400·120 + 120·84 + 84·10
        ("lenet5", 416_520, 0, 2, 3, 0),
        // lenet5's MACs; BN over 6·28² + 16·10² + 120 + 84 outputs
        ("lenet5-bn", 416_520, 6_508, 2, 3, 4),
        // 784·300 + 300·100 + 100·10
        ("mlp", 266_200, 0, 0, 3, 0),
        // the Bit Fusion benchmarks: the MAC totals of the authors' Eyeriss results (ALU / 16)
        ("bf-alexnet", 724_406_816, 0, 5, 3, 0),
        ("bf-svhn", 158_017_536, 0, 6, 3, 0),
        ("bf-cifar10", 616_966_144, 0, 6, 3, 0),
        ("bf-lenet5", 16_028_672, 0, 2, 2, 0),
        ("bf-vgg7", 317_456_384, 0, 6, 1, 0),
        // + the classifier head 512·1000
        ("bf-resnet18", 1_126_862_848, 0, 17, 1, 0),
        ("bf-rnn", 16_777_216, 0, 0, 1, 0),
        ("bf-lstm", 12_960_000, 0, 0, 1, 0),
    ];

    fn count(records: &[NodeRecord], op: &str) -> usize {
        records.iter().filter(|r| r.op_type == op).count()
    }

    #[test]
    fn every_model_matches_the_spec_totals() {
        assert_eq!(EXPECTED.len(), names().len());
        for (name, macs, bn, convs, gemms, bns) in EXPECTED {
            let (_, rec) = build_recorded(name, None, 0).unwrap();
            let got_macs: u64 = rec
                .iter()
                .filter(|r| matches!(r.op_type, "Conv" | "Gemm"))
                .map(|r| r.macs)
                .sum();
            let got_bn: u64 = rec
                .iter()
                .filter(|r| r.op_type == "BatchNormalization")
                .map(|r| r.out_elements())
                .sum();
            assert_eq!(got_macs, macs, "{name} MACs");
            assert_eq!(got_bn, bn, "{name} BN output elements");
            assert_eq!(count(&rec, "Conv"), convs, "{name} Conv nodes");
            assert_eq!(count(&rec, "Gemm"), gemms, "{name} Gemm nodes");
            assert_eq!(count(&rec, "BatchNormalization"), bns, "{name} BN nodes");
        }
    }

    #[test]
    fn cifar_resnet_parameter_counts_match_the_spec() {
        for (name, params) in [
            ("resnet20", 278_324),
            ("resnet38", 569_972),
            ("resnet74", 1_153_268),
            ("resnet110", 1_736_564),
            ("resnet152", 2_417_076),
            ("resnet164", 2_611_508),
        ] {
            let (_, rec) = build_recorded(name, None, 0).unwrap();
            assert_eq!(rec.iter().map(|r| r.params).sum::<u64>(), params, "{name}");
        }
    }

    #[test]
    fn outputs_have_the_class_count_and_inputs_the_listed_shape() {
        for &name in names() {
            let (model, rec) = build_recorded(name, Some(7), 1).unwrap();
            assert_eq!(rec.last().unwrap().out_shape, vec![7], "{name}");
            let graph = model.graph.as_ref().unwrap();
            let dims: Vec<_> = graph.input[0]
                .type_
                .tensor_type()
                .shape
                .dim
                .iter()
                .skip(1)
                .cloned()
                .collect();
            let listed = input_shape(name).unwrap();
            assert_eq!(dims.len(), 3, "{name}");
            for (d, want) in dims.iter().zip(listed) {
                assert_eq!(d.dim_value(), want as i64, "{name}");
            }
            assert!(describe(name).is_some_and(|d| !d.is_empty()));
        }
    }

    #[test]
    fn default_classes_follow_the_dataset() {
        assert_eq!(default_classes("resnet74"), Some(100));
        assert_eq!(default_classes("mobilenetv2"), Some(100));
        assert_eq!(default_classes("resnet50"), Some(1000));
        assert_eq!(default_classes("lenet5"), Some(10));
        assert_eq!(default_classes("mlp"), Some(10));
        assert_eq!(default_classes("vgg16"), None);
    }

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        let bytes = |seed| {
            build("resnet20", None, seed)
                .unwrap()
                .write_to_bytes()
                .unwrap()
        };
        assert_eq!(bytes(42), bytes(42));
        assert_ne!(bytes(42), bytes(43));
    }

    #[test]
    fn serialised_model_parses_back_identical() {
        let model = build("mobilenetv2", None, 3).unwrap();
        let bytes = model.write_to_bytes().unwrap();
        assert_eq!(ModelProto::parse_from_bytes(&bytes).unwrap(), model);
    }

    #[test]
    fn node_names_are_meaningful() {
        let (_, rec) = build_recorded("resnet20", None, 0).unwrap();
        let names: Vec<&str> = rec.iter().map(|r| r.name.as_str()).collect();
        for want in [
            "conv1",
            "bn1",
            "layer1.0.conv1",
            "layer1.0.add",
            "layer2.0.shortcut.conv",
            "layer3.2.relu2",
            "fc",
        ] {
            assert!(names.contains(&want), "{want} missing");
        }
        let (_, rec) = build_recorded("mobilenetv2", None, 0).unwrap();
        assert!(rec.iter().any(|r| r.name == "layers.16.conv3"));
    }

    #[test]
    fn conv_weights_follow_the_fan_out_rule_and_bn_starts_at_identity() {
        let model = build("resnet20", None, 9).unwrap();
        let graph = model.graph.as_ref().unwrap();
        let floats = |name: &str| -> Vec<f32> {
            let t = graph.initializer.iter().find(|t| t.name == name).unwrap();
            t.raw_data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        };
        let w = floats("layer3.1.conv2.weight");
        assert_eq!(w.len(), 64 * 64 * 9);
        let std = (w.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / w.len() as f64).sqrt();
        let want = (2.0f64 / (9.0 * 64.0)).sqrt();
        assert!((std / want - 1.0).abs() < 0.03, "std {std} want {want}");
        assert!(floats("layer3.1.bn2.weight").iter().all(|&g| g == 1.0));
        assert!(floats("layer3.1.bn2.bias").iter().all(|&b| b == 0.0));
    }

    #[test]
    fn bad_names_and_class_counts_are_clear_errors() {
        let err = build("resnet21", None, 0).unwrap_err().to_string();
        assert!(
            err.contains("resnet21") && err.contains("resnet20") && err.contains("mlp"),
            "{err}"
        );
        let err = build("lenet5", Some(0), 0).unwrap_err().to_string();
        assert!(err.contains("lenet5") && err.contains("classes"), "{err}");
        assert!(build("lenet5", Some(MAX_CLASSES + 1), 0).is_err());
    }
}
