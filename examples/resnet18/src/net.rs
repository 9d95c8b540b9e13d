//! ResNet-18 (batch 1, 224×224×3, ImageNet head) with random weights and batch norm
//! folded into the convolutions, run either with the generated kernels or with the
//! operators' naive references.

use std::io::Write;
use std::path::Path;

use autotune::{Constant, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::ops;

/// Which implementation of the operators a forward pass uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    Kernels,
    Reference,
}

/// Calls `$op` (the kernel) or `$reference`, with the same arguments, through `$each`.
macro_rules! run {
    ($each:expr, $imp:expr, $op:ident | $reference:ident, $($arg:expr),* $(,)?) => {
        $each(stringify!($op), &mut || {
            match $imp {
                Impl::Kernels => ops::$op($($arg),*),
                Impl::Reference => ops::$reference($($arg),*),
            }
            .expect("the network's shapes match its operators");
        })
    };
}

/// A convolution with batch norm folded in: weights `[k][c][r][r]` and bias `[k]`, as
/// constant handles (the kernels keep their packs of them there).
pub struct Conv {
    pub w: Constant<f32, 4>,
    pub b: Constant<f32, 1>,
    pub c: usize,
    pub k: usize,
    pub r: usize,
}

impl Conv {
    /// He-initialised weights, then a random batch norm (γ, β, mean, variance) folded
    /// into them: `w·γ/√(var+ε)` and `β − mean·γ/√(var+ε)`.
    fn random(rng: &mut StdRng, c: usize, k: usize, r: usize) -> Conv {
        let fan_in = (c * r * r) as f32;
        let a = (6.0 / fan_in).sqrt();
        let mut w: Vec<f32> = (0..k * c * r * r).map(|_| rng.gen_range(-a..a)).collect();
        let mut b = vec![0.0; k];
        let per_k = c * r * r;
        for (kk, bias) in b.iter_mut().enumerate() {
            let gamma: f32 = rng.gen_range(0.5..1.5);
            let beta: f32 = rng.gen_range(-0.1..0.1);
            let mean: f32 = rng.gen_range(-0.1..0.1);
            let var: f32 = rng.gen_range(0.5..1.5);
            let scale = gamma / (var + 1e-5).sqrt();
            for x in &mut w[kk * per_k..(kk + 1) * per_k] {
                *x *= scale;
            }
            *bias = beta - mean * scale;
        }
        Conv {
            w: constant(w, [k, c, r, r]),
            b: constant(b, [k]),
            c,
            k,
            r,
        }
    }

    /// FLOP of one call at output size `oh`×`ow`, padded taps included (as the peers
    /// count them).
    pub fn flop(&self, oh: usize, ow: usize) -> f64 {
        2.0 * (self.k * oh * ow * self.c * self.r * self.r) as f64
    }
}

/// `data` with dimensions `dims` as a constant input.
pub fn constant<const R: usize>(data: Vec<f32>, dims: [usize; R]) -> Constant<f32, R> {
    Constant::new(Tensor::from_vec(data, dims).expect("the data has the dimensions' length"))
}

/// A basic residual block: conv 3×3 (stride 1 or 2) + ReLU, conv 3×3 + shortcut + ReLU;
/// the shortcut is a strided conv 1×1 when the block halves the resolution.
pub struct Block {
    pub conv1: Conv,
    pub conv2: Conv,
    pub down: Option<Conv>,
    /// Input channels and resolution.
    pub c: usize,
    pub h: usize,
}

impl Block {
    pub fn k(&self) -> usize {
        self.conv2.k
    }
    /// Output resolution.
    pub fn oh(&self) -> usize {
        if self.down.is_some() {
            self.h / 2
        } else {
            self.h
        }
    }
}

pub struct ResNet18 {
    pub stem: Conv,
    pub blocks: Vec<Block>,
    /// Classifier `[1000][512]` and its bias.
    pub fc_w: Constant<f32, 2>,
    pub fc_b: Constant<f32, 1>,
}

pub const INPUT: [usize; 3] = [3, 224, 224];
pub const CLASSES: usize = 1000;

/// Activations of one forward pass, allocated once: the stem's output and four
/// buffers that the blocks take turns in (each block reads its input from one of
/// `io` and writes its output to the other; `mid` and `short` hold conv1's and the
/// shortcut's outputs), so that a layer writes where a layer just before it wrote,
/// in lines the core still holds, as ONNX Runtime's memory plan does. With a buffer
/// of its own per layer (every output written to lines last touched a pass earlier)
/// the pass ran 1.10–1.19× the sum of its calls' warm times; so, 1.05–1.11× on 1
/// thread and 1.14–1.19× on 2 (`bench/results/network-20261206-081319.log`).
pub struct Workspace {
    stem: Vec<f32>,
    io: [Vec<f32>; 2],
    mid: Vec<f32>,
    short: Vec<f32>,
    avg: Vec<f32>,
    logits: Vec<f32>,
}

/// Elements of the largest block activation (the pool's output and every layer of
/// the first stage: 64 channels of 56×56).
const ACTIVATION: usize = 64 * 56 * 56;

impl ResNet18 {
    pub fn random(seed: u64) -> ResNet18 {
        let mut rng = StdRng::seed_from_u64(seed);
        let stem = Conv::random(&mut rng, 3, 64, 7);
        let mut blocks = Vec::new();
        let (mut c, mut h) = (64, 56);
        for (stage, k) in [64, 128, 256, 512].into_iter().enumerate() {
            for i in 0..2 {
                let halve = stage > 0 && i == 0;
                let conv1 = Conv::random(&mut rng, c, k, 3);
                let conv2 = Conv::random(&mut rng, k, k, 3);
                let down = halve.then(|| Conv::random(&mut rng, c, k, 1));
                let block = Block {
                    conv1,
                    conv2,
                    down,
                    c,
                    h,
                };
                (c, h) = (k, block.oh());
                blocks.push(block);
            }
        }
        let a = (6.0f32 / 512.0).sqrt();
        let fc_w = (0..CLASSES * 512).map(|_| rng.gen_range(-a..a)).collect();
        let fc_b = (0..CLASSES).map(|_| rng.gen_range(-0.1..0.1)).collect();
        let (fc_w, fc_b) = (constant(fc_w, [CLASSES, 512]), constant(fc_b, [CLASSES]));
        ResNet18 {
            stem,
            blocks,
            fc_w,
            fc_b,
        }
    }

    pub fn workspace(&self) -> Workspace {
        let act = || vec![0.0; ACTIVATION];
        Workspace {
            stem: vec![0.0; 64 * 112 * 112],
            io: [act(), act()],
            mid: act(),
            short: act(),
            avg: vec![0.0; 512],
            logits: vec![0.0; CLASSES],
        }
    }

    /// FLOP of one forward pass (multiply-adds of every conv and the classifier, as 2).
    pub fn flop(&self) -> f64 {
        let mut f = self.stem.flop(112, 112) + 2.0 * (CLASSES * 512) as f64;
        for b in &self.blocks {
            let o = b.oh();
            f += b.conv1.flop(o, o) + b.conv2.flop(o, o);
            f += b.down.as_ref().map_or(0.0, |d| d.flop(o, o));
        }
        f
    }

    /// The logits for one image `[3][224][224]`.
    pub fn forward<'w>(&self, x: &[f32], ws: &'w mut Workspace, imp: Impl) -> &'w [f32] {
        self.forward_each(x, ws, imp, &mut |_, call| call())
    }

    /// [`ResNet18::forward`], handing each operator call (and its operator's name) to
    /// `each`, which must make it at least once: calls are idempotent, so a profiler
    /// can time each one warm, as the network runs it.
    pub fn forward_each<'w>(
        &self,
        x: &[f32],
        ws: &'w mut Workspace,
        imp: Impl,
        each: &mut dyn FnMut(&'static str, &mut dyn FnMut()),
    ) -> &'w [f32] {
        let s = &self.stem;
        run!(
            each,
            imp,
            conv7x7s2_relu_into | conv7x7s2_relu_reference_into,
            (x, INPUT),
            &s.w,
            &s.b,
            (&mut ws.stem, [64, 112, 112])
        );
        run!(
            each,
            imp,
            max_pool3x3s2_into | max_pool3x3s2_reference_into,
            (&ws.stem, [64, 112, 112]),
            (&mut ws.io[0][..ACTIVATION], [64, 56, 56])
        );
        // Block i reads io[i % 2] and writes io[(i + 1) % 2].
        for (i, b) in self.blocks.iter().enumerate() {
            let (c, h, k, o) = (b.c, b.h, b.k(), b.oh());
            let [x, y] = &mut ws.io;
            let (input, out) = if i % 2 == 0 { (x, y) } else { (y, x) };
            let input: &[f32] = &input[..c * h * h];
            let out = &mut out[..k * o * o];
            let (mid, short) = (&mut ws.mid[..k * o * o], &mut ws.short[..k * o * o]);
            if let Some(d) = &b.down {
                run!(
                    each,
                    imp,
                    conv3x3s2_relu_into | conv3x3s2_relu_reference_into,
                    (input, [c, h, h]),
                    &b.conv1.w,
                    &b.conv1.b,
                    (&mut *mid, [k, o, o])
                );
                run!(
                    each,
                    imp,
                    conv1x1s2_bias_into | conv1x1s2_bias_reference_into,
                    (input, [c, h, h]),
                    &d.w,
                    &d.b,
                    (&mut *short, [k, o, o])
                );
            } else {
                run!(
                    each,
                    imp,
                    conv3x3_relu_into | conv3x3_relu_reference_into,
                    (input, [c, h, h]),
                    &b.conv1.w,
                    &b.conv1.b,
                    (&mut *mid, [k, o, o])
                );
            }
            let shortcut: &[f32] = if b.down.is_some() { short } else { input };
            run!(
                each,
                imp,
                conv3x3_add_relu_into | conv3x3_add_relu_reference_into,
                (&*mid, [k, o, o]),
                &b.conv2.w,
                &b.conv2.b,
                (shortcut, [k, o, o]),
                (&mut *out, [k, o, o])
            );
        }
        run!(
            each,
            imp,
            global_avg_pool_into | global_avg_pool_reference_into,
            (&ws.io[self.blocks.len() % 2][..512 * 7 * 7], [512, 7, 7]),
            (&mut ws.avg, [512])
        );
        run!(
            each,
            imp,
            dense_bias_into | dense_bias_reference_into,
            (&ws.avg, [512]),
            &self.fc_w,
            &self.fc_b,
            (&mut ws.logits, [CLASSES])
        );
        &ws.logits
    }

    /// Writes the folded weights, an input and its logits for the peer benchmark
    /// (`bench/ort_bench.py`): `resnet18.bin` holds the tensors as little-endian f32, one
    /// after the other, in the order `resnet18.txt` lists them (`name dim×dim…` per line).
    pub fn export(&self, dir: &Path, input: &[f32], logits: &[f32]) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut out = Export {
            bin: std::io::BufWriter::new(std::fs::File::create(dir.join("resnet18.bin"))?),
            txt: String::new(),
        };
        out.put_data("input", &[1, 3, 224, 224], input)?;
        out.conv("stem", &self.stem)?;
        for (i, b) in self.blocks.iter().enumerate() {
            out.conv(&format!("block{i}.conv1"), &b.conv1)?;
            out.conv(&format!("block{i}.conv2"), &b.conv2)?;
            if let Some(d) = &b.down {
                out.conv(&format!("block{i}.down"), d)?;
            }
        }
        out.put("fc.w", &self.fc_w)?;
        out.put("fc.b", &self.fc_b)?;
        out.put_data("logits", &[1, CLASSES], logits)?;
        out.bin.flush()?;
        std::fs::write(dir.join("resnet18.txt"), out.txt)
    }
}

/// The two files of [`ResNet18::export`] being written.
struct Export {
    bin: std::io::BufWriter<std::fs::File>,
    txt: String,
}

impl Export {
    fn put<const R: usize>(&mut self, name: &str, t: &Constant<f32, R>) -> std::io::Result<()> {
        self.put_data(name, &t.tensor().dims(), t.tensor().data())
    }

    fn put_data(&mut self, name: &str, dims: &[usize], data: &[f32]) -> std::io::Result<()> {
        debug_assert_eq!(dims.iter().product::<usize>(), data.len());
        let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        self.txt += &format!("{name} {}\n", dims.join("x"));
        data.iter()
            .try_for_each(|x| self.bin.write_all(&x.to_le_bytes()))
    }

    fn conv(&mut self, name: &str, c: &Conv) -> std::io::Result<()> {
        self.put(&format!("{name}.w"), &c.w)?;
        self.put(&format!("{name}.b"), &c.b)
    }
}
