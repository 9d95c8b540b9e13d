//! The twelve conv layers C1–C12 of the AutoTVM paper's ResNet-18 table, each run
//! with the kernel the network uses for it (`--layers`), on random data.

use rand::rngs::StdRng;
use rand::SeedableRng;

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
            let x = random(&mut rng, c * h * h);
            let w = constant(random(&mut rng, k * c * r * r), [k, c, r, r]);
            let b = constant(random(&mut rng, k), [k]);
            let mut y = vec![0.0f32; k * o * o];
            // Each closure calls its operator with the layer's constant handles, as
            // the network does (a kernel's packs of them are made on the first call).
            macro_rules! layer {
                ($op:ident) => {
                    (
                        stringify!($op),
                        Box::new(move || {
                            ops::$op((&x, [c, h, h]), &w, &b, (&mut y, [k, o, o])).expect("shapes");
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
