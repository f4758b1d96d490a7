//! The image job's classifier: rebuilt from a checkpoint of `quill train` (its `model`
//! metadata names the architecture, `normalize_mean` / `normalize_std` the input scaling), asked
//! for the class probabilities of pictures (PNG or JPEG of any size, grey or colour, dark or
//! light background; IDX files as MNIST's), and scored on a labelled split.

use super::{at, meta, model_state};
use crate::nn::{models, Flatten, Module, Sequential};
use crate::tensor::{no_grad, Tensor};
use crate::{s, DType, Error, NDArray, Result};
use std::path::Path;

const OP: &str = "predict";

/// MNIST's pixel mean on [0, 1], the normalisation the image job trains with.
pub const MNIST_MEAN: f64 = 0.1307;
/// MNIST's pixel standard deviation on [0, 1]; see [`MNIST_MEAN`].
pub const MNIST_STD: f64 = 0.3081;

/// The image job's model called `name` (`mlp`: MLPResNet(784, 512, 3 blocks) after a flatten;
/// `cnn`: the small CNN), with weights drawn from `seed`, as `quill train` builds it.
pub fn image_model(name: &str, seed: u64) -> Result<Sequential> {
    match name {
        "mlp" => {
            let body = models::mlp_resnet(784, 512, 3, 10, 0.1, seed)?;
            Ok(Sequential::new().add(Flatten).add(body))
        }
        "cnn" => models::small_cnn(seed),
        other => Err(Error::invalid(
            "image model",
            format!("'{other}' is not an image model (mlp or cnn)"),
        )),
    }
}

/// An image classifier in eval mode and the normalisation its inputs get.
pub struct ImageClassifier {
    model: Sequential,
    mean: f64,
    std: f64,
}

/// The scores of a classifier on a labelled split.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// Each sample's class probabilities.
    pub probabilities: Vec<Vec<f64>>,
    /// Each sample's true class.
    pub labels: Vec<usize>,
    /// `confusion[true][predicted]`: how many samples of class `true` were given `predicted`.
    pub confusion: Vec<Vec<usize>>,
}

/// The most likely class of `p` (the first on a tie).
pub(crate) fn argmax(p: &[f64]) -> usize {
    (0..p.len())
        .rev()
        .max_by(|&a, &b| p[a].total_cmp(&p[b]))
        .unwrap_or(0)
}

impl Evaluation {
    /// The samples classified correctly (the confusion matrix's diagonal).
    pub fn correct(&self) -> usize {
        (0..self.confusion.len())
            .map(|k| self.confusion[k][k])
            .sum()
    }

    /// The fraction classified correctly (0 for an empty split).
    pub fn accuracy(&self) -> f64 {
        self.correct() as f64 / self.labels.len().max(1) as f64
    }

    /// Each class's fraction classified correctly (0 for a class with no samples).
    pub fn per_class(&self) -> Vec<f64> {
        self.confusion
            .iter()
            .enumerate()
            .map(|(k, row)| row[k] as f64 / row.iter().sum::<usize>().max(1) as f64)
            .collect()
    }

    /// Up to `k` wrong answers given with the most confidence, most confident first: (sample
    /// index, predicted class, its probability).
    pub fn most_confident_mistakes(&self, k: usize) -> Vec<(usize, usize, f64)> {
        let mut wrong: Vec<(usize, usize, f64)> = self
            .probabilities
            .iter()
            .zip(&self.labels)
            .enumerate()
            .filter(|(_, (p, &y))| argmax(p) != y)
            .map(|(i, (p, _))| (i, argmax(p), p[argmax(p)]))
            .collect();
        wrong.sort_by(|a, b| b.2.total_cmp(&a.2));
        wrong.truncate(k);
        wrong
    }
}

impl ImageClassifier {
    /// Rebuilds the classifier of a checkpoint of `quill train` (the image job). Checkpoints
    /// written before the normalisation was recorded get MNIST's.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let ck = crate::io::load_checkpoint(path)?;
        if let Some(task) = ck.metadata.get("task") {
            return Err(at(
                OP,
                path,
                format!(
                    "a checkpoint of task '{task}', not of the image job (`quill train`); for a \
                     language model use `quill generate`"
                ),
            ));
        }
        let name = meta(OP, path, &ck.metadata, "model", "`quill train`")?;
        let model = image_model(name, 0).map_err(|e| at(OP, path, e))?;
        model
            .load_state_dict(&model_state(&ck.tensors))
            .map_err(|e| at(OP, path, e))?;
        model.eval();
        let number = |key: &str, default: f64| -> Result<f64> {
            match ck.metadata.get(key) {
                None => Ok(default),
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| {
                        at(
                            OP,
                            path,
                            format!("metadata {key} = {v:?} is not a finite number"),
                        )
                    }),
            }
        };
        let (mean, std) = (
            number("normalize_mean", MNIST_MEAN)?,
            number("normalize_std", MNIST_STD)?,
        );
        if std <= 0.0 {
            return Err(at(
                OP,
                path,
                format!("metadata normalize_std = {std} is not positive"),
            ));
        }
        if let Some(shape) = ck.metadata.get("input_shape").filter(|s| *s != "1,28,28") {
            return Err(at(
                OP,
                path,
                format!("the model reads images of shape ({shape}); quill handles (1,28,28)"),
            ));
        }
        Ok(ImageClassifier { model, mean, std })
    }

    /// The model, in eval mode.
    pub fn model(&self) -> &Sequential {
        &self.model
    }

    /// Class probabilities, one row per image, of images (n, 1, 28, 28) with values in [0, 1]
    /// (any real dtype), normalised as in training.
    pub fn probabilities(&self, images: &NDArray) -> Result<Vec<Vec<f64>>> {
        if images.ndim() != 4 || images.shape()[1..] != [1, 28, 28] {
            return Err(Error::invalid(
                OP,
                format!(
                    "images must have shape (n, 1, 28, 28), got {:?}; ImageClassifier::prepare \
                     makes one from pixels of any size",
                    images.shape()
                ),
            ));
        }
        let _g = no_grad();
        let x = images
            .astype(DType::F32)?
            .sub_scalar(self.mean)?
            .div_scalar(self.std)?;
        let logits = self.model.forward(&Tensor::new(x))?;
        let classes = logits.shape().last().copied().unwrap_or(1).max(1);
        let p = logits
            .softmax(-1)?
            .array()
            .astype(DType::F64)?
            .to_vec::<f64>()?;
        Ok(p.chunks(classes).map(<[f64]>::to_vec).collect())
    }

    /// Scores the classifier on `images` (n, 1, 28, 28) in [0, 1] labelled `labels` (n,
    /// integers), 1000 at a time; `progress(done, total)` follows the batches.
    pub fn evaluate(
        &self,
        images: &NDArray,
        labels: &NDArray,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Evaluation> {
        let n = images.shape().first().copied().unwrap_or(0);
        if labels.shape() != [n] {
            return Err(Error::invalid(
                "evaluate",
                format!(
                    "{n} images but labels of shape {:?}; one label per image",
                    labels.shape()
                ),
            ));
        }
        let labels = labels.astype(DType::I64)?.to_vec::<i64>()?;
        let mut probabilities = Vec::with_capacity(n);
        for start in (0..n).step_by(1000) {
            let stop = (start + 1000).min(n);
            let batch = images.slice(&s![start as isize..stop as isize])?;
            probabilities.extend(self.probabilities(&batch)?);
            progress(stop, n);
        }
        let classes = probabilities.first().map_or(0, Vec::len);
        let labels = labels
            .iter()
            .map(|&y| {
                usize::try_from(y)
                    .ok()
                    .filter(|&y| y < classes)
                    .ok_or_else(|| {
                        Error::invalid(
                            "evaluate",
                            format!("label {y} is outside the model's classes 0..{classes}"),
                        )
                    })
            })
            .collect::<Result<Vec<usize>>>()?;
        let mut confusion = vec![vec![0usize; classes]; classes];
        for (p, &y) in probabilities.iter().zip(&labels) {
            confusion[y][argmax(p)] += 1;
        }
        Ok(Evaluation {
            probabilities,
            labels,
            confusion,
        })
    }

    /// Grey pixels in [0, 1] (row-major, `h` x `w`) as a (1, 1, 28, 28) image, a white digit on
    /// black as MNIST's: a light background (mean above 0.5) is inverted, and a picture of
    /// another size is resized to 28 x 28 (bilinear).
    pub fn prepare(pixels: &[f32], h: usize, w: usize) -> Result<NDArray> {
        if pixels.len() != h * w || h == 0 || w == 0 {
            return Err(Error::invalid(
                OP,
                format!(
                    "a picture of {h} x {w} needs {} pixels (at least one), got {}",
                    h * w,
                    pixels.len()
                ),
            ));
        }
        if let Some(bad) = pixels.iter().find(|x| !(0.0..=1.0).contains(*x)) {
            return Err(Error::invalid(
                OP,
                format!("pixel values must lie in [0, 1], found {bad}"),
            ));
        }
        let mut v = if (h, w) == (28, 28) {
            pixels.to_vec()
        } else {
            let (hu, wu) = (
                u32::try_from(h).map_err(|_| Error::invalid(OP, "picture too tall"))?,
                u32::try_from(w).map_err(|_| Error::invalid(OP, "picture too wide"))?,
            );
            let bytes = pixels.iter().map(|x| (x * 255.0).round() as u8).collect();
            let img = ::image::GrayImage::from_raw(wu, hu, bytes)
                .ok_or_else(|| Error::invalid(OP, format!("a picture of {h} x {w}")))?;
            let small =
                ::image::imageops::resize(&img, 28, 28, ::image::imageops::FilterType::Triangle);
            small.pixels().map(|p| p.0[0] as f32 / 255.0).collect()
        };
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        if mean > 0.5 {
            v.iter_mut().for_each(|x| *x = 1.0 - *x);
        }
        NDArray::from_vec(v, &[1, 1, 28, 28])
    }

    /// Pictures given as one array, (h, w), (n, h, w) or (n, 1, h, w), prepared as
    /// [`ImageClassifier::prepare`] into (n, 1, 28, 28): integer values are 0..=255 (u8
    /// pixels), float values lie in [0, 1].
    pub fn prepare_batch(pictures: &NDArray) -> Result<NDArray> {
        let shape = pictures.shape().to_vec();
        let (n, h, w) = match shape[..] {
            [h, w] => (1, h, w),
            [n, h, w] | [n, 1, h, w] => (n, h, w),
            _ => {
                return Err(Error::invalid(
                    OP,
                    format!("pictures must be (h, w), (n, h, w) or (n, 1, h, w), got {shape:?}"),
                ))
            }
        };
        let dtype = pictures.dtype();
        let scale = if dtype.is_float() {
            1.0
        } else if dtype == DType::Bool {
            return Err(Error::invalid(
                OP,
                "pictures of bool; give u8 or float pixels",
            ));
        } else {
            1.0 / 255.0
        };
        let v: Vec<f32> = pictures
            .astype(DType::F32)?
            .to_vec::<f32>()?
            .iter()
            .map(|x| x * scale)
            .collect();
        let size = h * w;
        let mut out = Vec::with_capacity(n * 784);
        for i in 0..n {
            let img = Self::prepare(&v[i * size..(i + 1) * size], h, w)
                .map_err(|e| Error::invalid(OP, format!("picture {i}: {e}")))?;
            out.extend(img.to_vec::<f32>()?);
        }
        NDArray::from_vec(out, &[n, 1, 28, 28])
    }

    /// The pictures of one file, each named and prepared ([`ImageClassifier::prepare`]): a PNG
    /// or JPEG gives one (colour becomes grey), an IDX file of shape (n, h, w) or (h, w) gives
    /// its n. The format is read from the content (the IDX magic `00 00 08`, gzip's `1f 8b`, or
    /// what the image decoder recognises), not the name.
    pub fn read_images(path: impl AsRef<Path>) -> Result<Vec<(String, NDArray)>> {
        let path = path.as_ref();
        let mut head = [0u8; 3];
        let n = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
            .map_err(|e| at(OP, path, e))?;
        let name = path.display().to_string();
        if n == 3 && (head == [0, 0, 8] || head[..2] == [0x1f, 0x8b]) {
            let a = crate::data::read_idx(path)?;
            let shape = a.shape().to_vec();
            let (count, h, w) = match shape[..] {
                [h, w] => (1, h, w),
                [count, h, w] => (count, h, w),
                _ => {
                    return Err(at(
                        OP,
                        path,
                        format!("an IDX file of shape {shape:?}; pictures are (n, h, w) or (h, w)"),
                    ))
                }
            };
            let pixels: Vec<f32> = a
                .astype(DType::F32)?
                .to_vec::<f32>()?
                .iter()
                .map(|x| x / 255.0)
                .collect();
            let size = h * w;
            return (0..count)
                .map(|i| {
                    let img = Self::prepare(&pixels[i * size..(i + 1) * size], h, w)
                        .map_err(|e| at(OP, path, e))?;
                    let label = if shape.len() == 2 {
                        name.clone()
                    } else {
                        format!("{name}[{i}]")
                    };
                    Ok((label, img))
                })
                .collect();
        }
        let img = ::image::io::Reader::open(path)
            .and_then(|r| r.with_guessed_format())
            .map_err(|e| at(OP, path, e))?
            .decode()
            .map_err(|e| at(OP, path, e))?
            .to_luma8();
        let (w, h) = img.dimensions();
        let v: Vec<f32> = img.pixels().map(|p| p.0[0] as f32 / 255.0).collect();
        let img = Self::prepare(&v, h as usize, w as usize).map_err(|e| at(OP, path, e))?;
        Ok(vec![(name, img)])
    }
}
