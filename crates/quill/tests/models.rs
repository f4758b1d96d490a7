//! The model zoo's CIFAR model: needle's ResNet9 maps (N, 3, 32, 32) to (N, 10), has the
//! parameter count its layer list implies, and fits a tiny batch.

use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{models, Module};
use quill::optim::{Adam, Optimizer};
use quill::tensor::Tensor;
use quill::{DType, NDArray};

#[test]
fn resnet9_shapes_parameter_count_and_a_falling_loss() {
    let m = models::resnet9(0).unwrap();
    // conv (k*k*in*out + out bias) + batchnorm (2 * out) per ConvBN.
    let convbn = |i: usize, o: usize, k: usize| k * k * i * o + o + 2 * o;
    let want = convbn(3, 16, 7)
        + convbn(16, 32, 3)
        + 2 * convbn(32, 32, 3)
        + convbn(32, 64, 3)
        + convbn(64, 128, 3)
        + 2 * convbn(128, 128, 3)
        + (128 * 128 + 128)
        + (128 * 10 + 10);
    assert_eq!(models::parameter_count(&m), want);

    let x = Tensor::new(quill::NDArray::randn(&[4, 3, 32, 32], 1, DType::F32).unwrap());
    let y = NDArray::from_vec(vec![0i64, 3, 7, 9], &[4]).unwrap();
    let mut opt = Adam::new(m.parameters(), 0.01).unwrap();
    let mut losses = Vec::new();
    for _ in 0..8 {
        let logits = m.forward(&x).unwrap();
        assert_eq!(logits.shape(), &[4, 10]);
        let loss = cross_entropy(&logits, &y, 0.0, Reduction::Mean).unwrap();
        losses.push(loss.item().unwrap());
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
    }
    assert!(losses[7] < 0.5 * losses[0], "{losses:?}");
}

use quill::nn::models::{LanguageModel, SeqKind};

fn ids(seq: usize, batch: usize, vocab: usize) -> NDArray {
    let v: Vec<i64> = (0..seq * batch)
        .map(|i| ((i * 7 + 3) % vocab) as i64)
        .collect();
    NDArray::from_vec(v, &[seq, batch]).unwrap()
}

#[test]
fn language_model_carries_state_exactly_across_windows() {
    let x = ids(10, 3, 11);
    let first = x
        .slice(&[quill::SliceArg::Range {
            start: Some(0),
            stop: Some(6),
            step: 1,
        }])
        .unwrap();
    let second = x
        .slice(&[quill::SliceArg::Range {
            start: Some(6),
            stop: Some(10),
            step: 1,
        }])
        .unwrap();
    for kind in [
        SeqKind::Lstm,
        SeqKind::Gru,
        SeqKind::RnnTanh,
        SeqKind::RnnRelu,
    ] {
        let m = LanguageModel::new(11, 8, 16, 2, kind, 10, 5).unwrap();
        let (whole, _) = m.forward_with(&x, None).unwrap();
        assert_eq!(whole.shape(), &[30, 11]);
        let (a, st) = m.forward_with(&first, None).unwrap();
        let (b, _) = m.forward_with(&second, Some(&st.detach())).unwrap();
        let split: Vec<f32> = a
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .chain(b.to_vec::<f32>().unwrap())
            .collect();
        let full: Vec<f32> = whole.to_vec().unwrap();
        for (i, (p, q)) in split.iter().zip(&full).enumerate() {
            assert!((p - q).abs() < 1e-5, "{kind:?} [{i}]: {p} vs {q}");
        }
        // The state of another model kind is refused.
        let other = if kind == SeqKind::Lstm {
            SeqKind::Gru
        } else {
            SeqKind::Lstm
        };
        let (_, wrong) = LanguageModel::new(11, 8, 16, 2, other, 10, 5)
            .unwrap()
            .forward_with(&first, None)
            .unwrap();
        assert!(m.forward_with(&second, Some(&wrong)).is_err());
    }
    let t = LanguageModel::new(11, 32, 16, 1, SeqKind::Transformer, 10, 5).unwrap();
    let (y, st) = t.forward_with(&x, None).unwrap();
    assert_eq!(y.shape(), &[30, 11]);
    assert!(st.0.is_empty());
    // Causal: the first window's logits do not depend on later tokens.
    let (a, _) = t.forward_with(&first, None).unwrap();
    let (ya, aa): (Vec<f32>, Vec<f32>) = (y.to_vec().unwrap(), a.to_vec().unwrap());
    for (i, (p, q)) in aa.iter().zip(&ya).enumerate() {
        assert!((p - q).abs() < 1e-4, "transformer [{i}]: {p} vs {q}");
    }
    assert!(LanguageModel::new(11, 33, 16, 1, SeqKind::Transformer, 10, 5).is_err());
    assert!(LanguageModel::new(0, 8, 16, 1, SeqKind::Lstm, 10, 5).is_err());
    assert!(t.forward_with(&x.reshape(&[-1]).unwrap(), None).is_err());
    let names: Vec<String> = t.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert!(
        names[0] == "embedding.weight" && names.last().unwrap() == "linear.bias",
        "{names:?}"
    );
}
