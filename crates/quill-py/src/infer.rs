//! `quill.infer`'s native half: the trained language model and image classifier of
//! `quill::infer`, loaded from a checkpoint and used from Python (the same code as the CLI's
//! `generate`, `evaluate` and `predict`).

use crate::convert::{from_numpy_like, to_numpy, Q};
use crate::ndarray::PyNDArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use quill::infer::{Draw, ImageClassifier, TextModel};
use quill::{Error, NDArray};

/// A language model of `quill train --task lm` with its tokenizer.
#[pyclass(name = "TextModel", module = "quill._native._infer", unsendable)]
pub struct PyTextModel {
    inner: TextModel,
}

#[quill_py_guard::guard("TextModel")]
#[pymethods]
impl PyTextModel {
    /// Rebuilds the model and tokenizer from the checkpoint at `path` alone.
    #[staticmethod]
    fn load(path: std::path::PathBuf) -> PyResult<Self> {
        Ok(PyTextModel {
            inner: TextModel::load(path).q()?,
        })
    }

    /// `prompt` and `tokens` tokens drawn after it. `stream`, when given, is called with each
    /// piece of text as it is drawn; an exception it raises stops the sampling.
    #[pyo3(signature = (prompt="", tokens=200, temperature=0.8, top_k=40, seed=0, stream=None))]
    fn generate(
        &self,
        prompt: &str,
        tokens: usize,
        temperature: f64,
        top_k: usize,
        seed: u64,
        stream: Option<Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let d = Draw {
            tokens,
            temperature,
            top_k,
            seed,
        };
        let Some(f) = stream else {
            return self.inner.generate(prompt, &d).q();
        };
        let mut text = prompt.to_string();
        let mut raised = None;
        let r = self.inner.sample(prompt, &d, |s| {
            text.push_str(s);
            f.call1((s,)).map(drop).map_err(|e| {
                raised = Some(e);
                Error::invalid("generate", "stopped by the stream callback")
            })
        });
        if let Some(e) = raised {
            return Err(e);
        }
        r.q()?;
        Ok(text)
    }

    /// The vocabulary in id order.
    #[getter]
    fn vocabulary(&self) -> Vec<String> {
        self.inner.vocabulary().to_vec()
    }

    /// True when each token is a character (else a word).
    #[getter]
    fn char_level(&self) -> bool {
        self.inner.is_char_level()
    }
}

/// An image classifier of `quill train` (the image job) with its input normalisation.
#[pyclass(name = "ImageClassifier", module = "quill._native._infer", unsendable)]
pub struct PyImageClassifier {
    inner: ImageClassifier,
}

#[quill_py_guard::guard("ImageClassifier")]
#[pymethods]
impl PyImageClassifier {
    /// Rebuilds the classifier from the checkpoint at `path` alone.
    #[staticmethod]
    fn load(path: std::path::PathBuf) -> PyResult<Self> {
        Ok(PyImageClassifier {
            inner: ImageClassifier::load(path).q()?,
        })
    }

    /// Class probabilities (n, classes), float64, of pictures given as one array: (h, w),
    /// (n, h, w) or (n, 1, h, w), u8 pixels or floats in [0, 1], any size, either background.
    fn predict<'py>(
        &self,
        py: Python<'py>,
        pictures: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let a = match pictures.extract::<PyRef<PyNDArray>>() {
            Ok(a) => a.inner.clone(),
            Err(_) => from_numpy_like(pictures, None)?,
        };
        let batch = ImageClassifier::prepare_batch(&a).q()?;
        self.probabilities(py, &batch)
    }

    /// The pictures of a PNG, JPEG or IDX file (raw or gzip): their names and their class
    /// probabilities (n, classes).
    fn predict_file<'py>(
        &self,
        py: Python<'py>,
        path: std::path::PathBuf,
    ) -> PyResult<(Vec<String>, Bound<'py, PyAny>)> {
        let pics = ImageClassifier::read_images(path).q()?;
        let names = pics.iter().map(|(n, _)| n.clone()).collect();
        let n = pics.len();
        let mut all = Vec::with_capacity(n * 784);
        for (_, a) in &pics {
            all.extend(a.to_vec::<f32>().q()?);
        }
        let batch = NDArray::from_vec(all, &[n, 1, 28, 28]).q()?;
        Ok((names, self.probabilities(py, &batch)?))
    }

    /// Scores the classifier on `images` (n, 1, 28, 28) in [0, 1] (float) labelled `labels`
    /// (n,): a dict of accuracy, correct, samples, per_class, confusion (classes x classes,
    /// rows the true class) and mistakes, the 16 most confident wrong answers as (index,
    /// predicted, probability).
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        images: &Bound<'py, PyAny>,
        labels: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let arr = |x: &Bound<'py, PyAny>| -> PyResult<NDArray> {
            match x.extract::<PyRef<PyNDArray>>() {
                Ok(a) => Ok(a.inner.clone()),
                Err(_) => from_numpy_like(x, None),
            }
        };
        self.scores(py, &arr(images)?, &arr(labels)?)
    }

    /// As `evaluate`, on the test split (`t10k-*`) of the MNIST-format directory `data`.
    fn evaluate_split<'py>(
        &self,
        py: Python<'py>,
        data: std::path::PathBuf,
    ) -> PyResult<Bound<'py, PyDict>> {
        let test = quill::data::Mnist::load(data, false).q()?;
        self.scores(py, &test.images, &test.labels)
    }
}

impl PyImageClassifier {
    fn scores<'py>(
        &self,
        py: Python<'py>,
        images: &NDArray,
        labels: &NDArray,
    ) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.evaluate(images, labels, |_, _| {}).q()?;
        let d = PyDict::new(py);
        d.set_item("accuracy", s.accuracy())?;
        d.set_item("correct", s.correct())?;
        d.set_item("samples", s.labels.len())?;
        d.set_item("per_class", s.per_class())?;
        let k = s.confusion.len();
        let flat: Vec<i64> = s.confusion.iter().flatten().map(|&c| c as i64).collect();
        let cm = NDArray::from_vec(flat, &[k, k]).q()?;
        d.set_item("confusion", to_numpy(py, &cm)?)?;
        d.set_item("mistakes", s.most_confident_mistakes(16))?;
        Ok(d)
    }

    fn probabilities<'py>(&self, py: Python<'py>, batch: &NDArray) -> PyResult<Bound<'py, PyAny>> {
        let rows = self.inner.probabilities(batch).q()?;
        let (n, k) = (rows.len(), rows.first().map_or(10, Vec::len));
        let flat: Vec<f64> = rows.into_iter().flatten().collect();
        to_numpy(py, &NDArray::from_vec(flat, &[n, k]).q()?)
    }
}

/// Adds the `_infer` submodule.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "_infer")?;
    sub.add_class::<PyTextModel>()?;
    sub.add_class::<PyImageClassifier>()?;
    m.add_submodule(&sub)?;
    Ok(())
}
