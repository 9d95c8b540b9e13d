//! The twelve conv layers C1–C12 of the AutoTVM paper's ResNet-18 table, each run
//! with the kernel the network uses for it (`--layers`), on random data.

use rand::rngs::StdRng;
use rand::SeedableRng;

use autotune::{Activation, Tensor};

use crate::net::constant;
use crate::{ops, random};

pub struct Layer {
    pub name: &'static str,
    pub what: String,
    pub flop: f64,
    pub run: Box<dyn FnMut()>,
}

/// (name, C, H, K, kernel, stride).
const TABLE: [(&str, usize, usize, usize, usize, usize); 12] = [
    ("C1", 3, 224, 64, 7, 2),
    ("C2", 64, 56, 64, 3, 1),
    ("C3", 64, 56, 64, 1, 1),
    ("C4", 64, 56, 128, 3, 2),
    ("C5", 64, 56, 128, 1, 2),
    ("C6", 128, 28, 128, 3, 1),
    ("C7", 128, 28, 256, 3, 2),
    ("C8", 128, 28, 256, 1, 2),
    ("C9", 256, 14, 256, 3, 1),
    ("C10", 256, 14, 512, 3, 2),
    ("C11", 256, 14, 512, 1, 2),
    ("C12", 512, 7, 512, 3, 1),
];

pub fn all() -> Vec<Layer> {
    let mut rng = StdRng::seed_from_u64(7);
    TABLE
        .iter()
        .map(|&(name, c, h, k, r, st)| {
            let o = h / st;
            let x = Tensor::from_vec(random(&mut rng, c * h * h), [c, h, h]).expect("len");
            let w = constant(random(&mut rng, k * c * r * r), [k, c, r, r]);
            let b = constant(random(&mut rng, k), [k]);
            let mut y = Activation::zeros([k, o, o]).expect("fits");
            // Each closure calls its operator with the layer's constant handles (a
            // kernel's packs of them are made on the first call) and its input laid
            // out as the network's previous kernel leaves it: blocked by 16 channels
            // where they divide (the image of C1 stays plain).
            let x = Activation::new(x);
            let x = x.clone().into_layout(16).unwrap_or(x);
            macro_rules! layer {
                ($op:ident) => {
                    (
                        stringify!($op),
                        Box::new(move || {
                            ops::$op(&x, &w, &b, &mut y).expect("shapes");
                        }) as Box<dyn FnMut()>,
                    )
                };
            }
            let (what, run) = match (r, st) {
                (7, 2) => layer!(conv7x7s2_relu_into),
                (3, 1) => layer!(conv3x3_relu_into),
                (3, 2) => layer!(conv3x3s2_relu_into),
                (1, 2) => layer!(conv1x1s2_bias_into),
                _ => layer!(conv1x1_bias_into),
            };
            let what = what.trim_end_matches("_into");
            Layer {
                name,
                what: format!("{what} C{c} {h}x{h} K{k}"),
                flop: 2.0 * (k * o * o * c * r * r) as f64,
                run,
            }
        })
        .collect()
}
