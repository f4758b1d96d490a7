//! Per-batch image transforms for f32 image batches: `Normalize`, `RandomCrop` (zero padding, crop
//! back to the input size), `RandomHorizontalFlip`, and `Compose`. Random choices come from a
//! caller-supplied ChaCha8 stream, so a seed fixes every augmentation on every platform.
//!
//! Images are (n, c, h, w), (n, h, w) (one channel) or (n, d) flat (one channel; the spatial
//! transforms need d to be a square, h = w = sqrt(d)). Outputs have the input's shape.

use crate::NDArray;
use quill_core::{DType, Error, Result};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A transform of a batch of images. `rng` is the stream for this batch's random choices; the
/// random transforms draw per image, in batch order, as their docs say.
pub trait Transform: Send + Sync {
    /// The transformed batch, with the shape of `images`. Errors on a shape the transform cannot
    /// read as images or a dtype it does not handle (the built-in ones take f32 only).
    fn apply(&self, images: &NDArray, rng: &mut ChaCha8Rng) -> Result<NDArray>;
}

/// (n, c, h, w) of a batch, by the rules in the module docs; `square` asks for a spatial layout.
fn geometry(op: &'static str, shape: &[usize], square: bool) -> Result<[usize; 4]> {
    match *shape {
        [n, c, h, w] => Ok([n, c, h, w]),
        [n, h, w] => Ok([n, 1, h, w]),
        [n, d] if !square => Ok([n, 1, 1, d]),
        [n, d] => {
            let s = (d as f64).sqrt().round() as usize;
            if s * s == d {
                Ok([n, 1, s, s])
            } else {
                Err(Error::invalid(op, format!("a flat batch (n, d) needs a square d to be read as images; got shape {shape:?}: reshape it to (n, c, h, w) first")))
            }
        }
        _ => Err(Error::invalid(
            op,
            format!("expected images (n, c, h, w), (n, h, w) or (n, d); got shape {shape:?}"),
        )),
    }
}

fn f32_data(op: &'static str, images: &NDArray) -> Result<Vec<f32>> {
    if images.dtype() != DType::F32 {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::F32,
            got: images.dtype(),
        });
    }
    images.to_vec::<f32>()
}

/// `(x - mean[c]) / std[c]` per channel (one value for all channels when given one).
#[derive(Debug, Clone)]
pub struct Normalize {
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl Normalize {
    /// Per-channel statistics, one `mean` and one `std` per channel, or one of each for all
    /// channels. Errors when the lengths differ or are zero, or when a `std` is not finite and
    /// positive (it is a divisor). The channel count is checked against each batch in `apply`.
    pub fn new(mean: &[f32], std: &[f32]) -> Result<Normalize> {
        const OP: &str = "Normalize::new";
        if mean.is_empty() || mean.len() != std.len() {
            return Err(Error::invalid(OP, format!("needs one mean and one std per channel (at least one); got {} means and {} stds", mean.len(), std.len())));
        }
        if let Some(s) = std.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(Error::invalid(
                OP,
                format!("std must be finite and positive, got {s}"),
            ));
        }
        Ok(Normalize {
            mean: mean.to_vec(),
            std: std.to_vec(),
        })
    }
}

impl Transform for Normalize {
    fn apply(&self, images: &NDArray, _rng: &mut ChaCha8Rng) -> Result<NDArray> {
        const OP: &str = "Normalize";
        let [_, c, h, w] = geometry(OP, images.shape(), false)?;
        if self.mean.len() != 1 && self.mean.len() != c {
            return Err(Error::invalid(
                OP,
                format!(
                    "{} channel statistics for images of shape {:?} with {c} channels",
                    self.mean.len(),
                    images.shape()
                ),
            ));
        }
        let mut data = f32_data(OP, images)?;
        let plane = h * w;
        if plane > 0 {
            for (k, p) in data.chunks_exact_mut(plane).enumerate() {
                let ch = if self.mean.len() == 1 { 0 } else { k % c };
                // Multiplying by the reciprocal would differ from (x - m) / s in the last bit.
                let (m, s) = (self.mean[ch], self.std[ch]);
                p.iter_mut().for_each(|x| *x = (*x - m) / s);
            }
        }
        NDArray::from_vec(data, images.shape())
    }
}

/// Pads each image with `padding` zeros on every side and crops a window of the original size at
/// a random position (torchvision's `RandomCrop(size, padding)`). Draws per image: the row offset,
/// then the column offset, each uniform in `0..=2 * padding`; all channels share them.
#[derive(Debug, Clone, Copy)]
pub struct RandomCrop {
    /// Zeros added on each side, in pixels; also the largest shift of the crop from centre.
    pub padding: usize,
}

impl RandomCrop {
    /// A crop that shifts each image by up to `padding` pixels in each direction; 0 leaves
    /// images unchanged.
    pub fn new(padding: usize) -> RandomCrop {
        RandomCrop { padding }
    }
}

impl Transform for RandomCrop {
    fn apply(&self, images: &NDArray, rng: &mut ChaCha8Rng) -> Result<NDArray> {
        const OP: &str = "RandomCrop";
        let [n, c, h, w] = geometry(OP, images.shape(), true)?;
        let src = f32_data(OP, images)?;
        let mut out = vec![0f32; src.len()];
        let pad = self.padding;
        let plane = h * w;
        for img in 0..n {
            let dy = rng.random_range(0..=2 * pad);
            let dx = rng.random_range(0..=2 * pad);
            // Output (y, x) reads input (y + dy - pad, x + dx - pad) when inside, else stays 0.
            let x0 = pad.saturating_sub(dx);
            let x1 = w.min((w + pad).saturating_sub(dx));
            if x0 >= x1 {
                continue;
            }
            for ch in 0..c {
                let base = (img * c + ch) * plane;
                for y in 0..h {
                    let Some(sy) = (y + dy).checked_sub(pad).filter(|&sy| sy < h) else {
                        continue;
                    };
                    let s = base + sy * w + x0 + dx - pad;
                    let d = base + y * w;
                    out[d + x0..d + x1].copy_from_slice(&src[s..s + (x1 - x0)]);
                }
            }
        }
        NDArray::from_vec(out, images.shape())
    }
}

/// Mirrors each image left-right with probability `p`. Draws one `f64` in [0, 1) per image
/// (always, whatever `p`), flipping when it is `< p`.
#[derive(Debug, Clone, Copy)]
pub struct RandomHorizontalFlip {
    /// Probability of flipping each image; not checked, so `p <= 0` never flips and `p >= 1`
    /// always does.
    pub p: f64,
}

impl RandomHorizontalFlip {
    /// A flip with probability `p` per image (0.5 is the usual choice).
    pub fn new(p: f64) -> RandomHorizontalFlip {
        RandomHorizontalFlip { p }
    }
}

impl Transform for RandomHorizontalFlip {
    fn apply(&self, images: &NDArray, rng: &mut ChaCha8Rng) -> Result<NDArray> {
        const OP: &str = "RandomHorizontalFlip";
        let [n, c, h, w] = geometry(OP, images.shape(), true)?;
        let mut data = f32_data(OP, images)?;
        let image = c * h * w;
        for i in 0..n {
            let flip = rng.random::<f64>() < self.p;
            if flip && w > 0 {
                data[i * image..(i + 1) * image]
                    .chunks_exact_mut(w)
                    .for_each(|row| row.reverse());
            }
        }
        NDArray::from_vec(data, images.shape())
    }
}

/// Applies transforms in order, sharing one random stream.
pub struct Compose(pub Vec<Box<dyn Transform>>);

impl Transform for Compose {
    fn apply(&self, images: &NDArray, rng: &mut ChaCha8Rng) -> Result<NDArray> {
        let mut x = images.clone();
        for t in &self.0 {
            x = t.apply(&x, rng)?;
        }
        Ok(x)
    }
}
