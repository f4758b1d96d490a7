//! The training checkpoint: model and optimizer state, the options a resume must repeat, the
//! epoch and the per-epoch history, saved with per-tensor checksums (`quill::io::save_checkpoint`)
//! after every epoch. `--resume` refuses a checkpoint that does not fit this run: a tensor whose
//! dtype or shape differs from the model's, a metadata number out of range, a failed checksum,
//! and NaN or infinite weights unless `--allow-nonfinite`.

use super::metrics::{self, Row, HISTORY_KEY};
use super::options::{Options, MAX_EPOCHS};
use super::q;
use quill::nn::Module;
use quill::optim::Optimizer;
use quill::{DType, NDArray};
use std::collections::BTreeMap;

/// Writes model and optimizer state with `meta` (which names the epoch and the options a resume
/// must repeat) and `rows` (the history so far) to the checkpoint, atomically.
pub(super) fn save(
    o: &Options,
    model: &dyn Module,
    opt: &dyn Optimizer,
    meta: &BTreeMap<String, String>,
    rows: &[Row],
) -> Result<(), String> {
    let mut all: Vec<(String, NDArray)> = model
        .state_dict()
        .into_iter()
        .map(|(n, a)| (format!("model.{n}"), a))
        .collect();
    all.extend(
        q(opt.state_dict())?
            .into_iter()
            .map(|(n, a)| (format!("optim.{n}"), a)),
    );
    let mut meta = meta.clone();
    meta.insert(HISTORY_KEY.into(), metrics::history(rows));
    q(quill::io::save_checkpoint(
        &o.checkpoint_path(),
        &all,
        &meta,
    ))
}

/// What `resume` restored: the last finished epoch, and the history up to it when the
/// checkpoint carries one (those written before histories were stored do not).
pub(super) struct Resumed {
    pub epoch: usize,
    pub history: Option<Vec<Row>>,
}

/// Metadata that describes the image model's input rather than the run, absent from checkpoints
/// written before 2026-12-07; `resume` accepts their absence.
const DESCRIPTIVE: [&str; 4] = ["input_shape", "classes", "normalize_mean", "normalize_std"];

/// Restores model and optimizer after checking that every entry of `want` but the epoch
/// matches the checkpoint's metadata and that every tensor fits (see the module docs).
pub(super) fn resume(
    o: &Options,
    model: &dyn Module,
    opt: &mut dyn Optimizer,
    want: &BTreeMap<String, String>,
) -> Result<Resumed, String> {
    let path = o.checkpoint_path();
    let at = |msg: String| format!("{}: {msg}", path.display());
    let ck = q(quill::io::load_checkpoint(&path))?;
    let meta = &ck.metadata;
    for (key, want) in want.iter().filter(|(k, _)| *k != "epoch") {
        // Keys that describe the model's input were added later; older checkpoints lack them.
        if meta.get(key).is_none() && DESCRIPTIVE.contains(&key.as_str()) {
            continue;
        }
        if meta.get(key) != Some(want) {
            return Err(at(format!(
                "the checkpoint was made with {key} = {:?}, this run has {want:?}; pass the same options to resume",
                meta.get(key)
            )));
        }
    }
    let epoch = number(meta, "epoch", 1, MAX_EPOCHS).map_err(at)?;
    if epoch > o.epochs {
        return Err(at(format!(
            "the checkpoint is at epoch {epoch}, past --epochs {}; pass --epochs {epoch} or more to resume it",
            o.epochs
        )));
    }
    let part = |p: &str| -> Vec<(String, NDArray)> {
        ck.tensors
            .iter()
            .filter_map(|(n, a)| n.strip_prefix(p).map(|s| (s.to_string(), a.clone())))
            .collect()
    };
    let (model_state, optim_state) = (part("model."), part("optim."));
    check_model(&model_state, model).map_err(at)?;
    check_optimizer(&optim_state, model).map_err(at)?;
    if !o.allow_nonfinite {
        for (name, a) in &ck.tensors {
            check_finite(name, a).map_err(at)?;
        }
    }
    if !ck.verified {
        eprintln!(
            "note: {} carries no checksums (written before quill added them); loaded unverified",
            path.display()
        );
    }
    q(model.load_state_dict(&model_state))?;
    q(opt.load_state_dict(&optim_state))?;
    let history = meta
        .get(HISTORY_KEY)
        .map(|h| metrics::parse_history(h, epoch))
        .transpose()
        .map_err(at)?;
    Ok(Resumed { epoch, history })
}

/// The whole number under `key`, which must lie in `lo..=hi`.
fn number(
    meta: &BTreeMap<String, String>,
    key: &str,
    lo: usize,
    hi: usize,
) -> Result<usize, String> {
    let v = meta
        .get(key)
        .ok_or_else(|| format!("the metadata has no {key:?}"))?;
    v.parse::<usize>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| {
            format!("the metadata's {key:?} is {v:?}, not a whole number in {lo}..={hi}")
        })
}

fn describe(a: &NDArray) -> String {
    format!("{} {:?}", a.dtype(), a.shape())
}

/// Every tensor of the model present with the model's dtype and shape, and no other.
fn check_model(state: &[(String, NDArray)], model: &dyn Module) -> Result<(), String> {
    let mine = model.state_dict();
    for (name, want) in &mine {
        let Some((_, got)) = state.iter().find(|(n, _)| n == name) else {
            return Err(format!(
                "the checkpoint lacks the model tensor \"model.{name}\""
            ));
        };
        if got.dtype() != want.dtype() || got.shape() != want.shape() {
            return Err(format!(
                "tensor \"model.{name}\": the model expects {}, the checkpoint has {}",
                describe(want),
                describe(got)
            ));
        }
    }
    if let Some((name, _)) = state
        .iter()
        .find(|(n, _)| !mine.iter().any(|(m, _)| m == n))
    {
        return Err(format!(
            "the checkpoint has the tensor \"model.{name}\", which this model does not"
        ));
    }
    Ok(())
}

/// The optimizer's entries with the dtypes and shapes it writes: `step` and per-parameter
/// `state.I.step` one I64, `lr` one F64, other per-parameter buffers like parameter I. Names
/// it does not know are left to the optimizer's own validation.
fn check_optimizer(state: &[(String, NDArray)], model: &dyn Module) -> Result<(), String> {
    let params = model.parameters();
    for (name, got) in state {
        let scalar = |dtype: DType| (dtype, Vec::<usize>::new());
        let want = match name.as_str() {
            "step" => scalar(DType::I64),
            "lr" => scalar(DType::F64),
            _ => {
                let Some((i, key)) = name
                    .strip_prefix("state.")
                    .and_then(|r| r.split_once('.'))
                    .and_then(|(i, k)| Some((i.parse::<usize>().ok()?, k)))
                else {
                    continue;
                };
                let Some(p) = params.get(i) else {
                    return Err(format!(
                        "the optimizer entry \"optim.{name}\" is for parameter {i}, but the model has {}",
                        params.len()
                    ));
                };
                if key == "step" {
                    scalar(DType::I64)
                } else {
                    (p.dtype(), p.shape().to_vec())
                }
            }
        };
        if got.dtype() != want.0 || got.shape() != want.1.as_slice() {
            return Err(format!(
                "tensor \"optim.{name}\": expected {} {:?}, the checkpoint has {}",
                want.0,
                want.1,
                describe(got)
            ));
        }
    }
    Ok(())
}

/// No NaN or infinity in a floating-point tensor.
fn check_finite(name: &str, a: &NDArray) -> Result<(), String> {
    if !a.dtype().is_float() || a.numel() == 0 {
        return Ok(());
    }
    let v: Vec<f64> = q(a.astype(DType::F64).and_then(|a| a.to_vec()))?;
    let bad: Vec<usize> = (0..v.len()).filter(|&i| !v[i].is_finite()).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "tensor {name:?} holds {} non-finite values (the first, {}, at flat index {i}); the run that wrote it diverged. Pass --allow-nonfinite to resume it anyway",
            bad.len(),
            v[i]
        )),
    }
}
