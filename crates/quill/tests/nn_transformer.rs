//! Attention and Transformer modules against a reference composition written here from the
//! modules' parameters (LayerNorm by its formula, projections as matmuls, the composite
//! attention), gradchecks through the modules in f64, and a tiny sequence task (reversal)
//! whose loss must fall.

use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{
    AttentionLayer, Embedding, LayerNorm, Linear, Module, MultiHeadAttention, Transformer,
    TransformerLayer,
};
use quill::optim::{Adam, Optimizer};
use quill::tensor::{gradcheck, GradcheckOptions, Tensor};
use quill::{DType, NDArray, Result};
use quill_test_support::Prng;

fn randt(rng: &mut Prng, shape: &[usize], grad: bool) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| 2.0 * rng.unit() - 1.0).collect();
    Tensor::from_array(NDArray::from_vec(v, shape).unwrap(), grad).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.array()
        .astype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

fn assert_close(got: &Tensor, want: &Tensor, tol: f64, ctx: &str) {
    assert_eq!(got.shape(), want.shape(), "{ctx}: shapes");
    for (i, (a, b)) in vals(got).iter().zip(vals(want)).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{ctx}: {i}: {a} vs {b}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The reference composition

fn ref_ln(x: &Tensor, n: &LayerNorm) -> Result<Tensor> {
    let m = x.mean(Some(&[-1]), true)?;
    let c = x.sub(&m)?;
    let var = c.square()?.mean(Some(&[-1]), true)?;
    c.div(&var.add_scalar(n.eps)?.sqrt()?)?
        .mul(&n.weight)?
        .add(&n.bias)
}

fn ref_linear(x: &Tensor, l: &Linear) -> Result<Tensor> {
    let y = x.matmul(&l.weight)?;
    match &l.bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

fn ref_attention_layer(
    l: &AttentionLayer,
    q: &Tensor,
    kv: &Tensor,
    causal: bool,
) -> Result<Tensor> {
    let (q, k, v) = match &l.prenorm {
        Some([a, b, c]) => (ref_ln(q, a)?, ref_ln(kv, b)?, ref_ln(kv, c)?),
        None => (q.clone(), kv.clone(), kv.clone()),
    };
    let (h, dh) = (l.num_head as isize, l.dim_head as isize);
    let split = |x: &Tensor| -> Result<Tensor> {
        let (b, s) = (x.shape()[0] as isize, x.shape()[1] as isize);
        x.reshape(&[b, s, h, dh])?.permute(&[0, 2, 1, 3])
    };
    let qh = split(&ref_linear(&q, &l.q_projection)?)?;
    let kh = split(&ref_linear(&k, &l.k_projection)?)?;
    let vh = split(&ref_linear(&v, &l.v_projection)?)?;
    let o = qh.attention_composite(&kh, &vh, causal, None)?;
    let (b, s) = (q.shape()[0] as isize, q.shape()[1] as isize);
    let o = o.permute(&[0, 2, 1, 3])?.reshape(&[b, s, h * dh])?;
    ref_linear(&o, &l.out_projection)
}

fn ref_transformer_layer(l: &TransformerLayer, x: &Tensor, causal: bool) -> Result<Tensor> {
    let mlp = |x: &Tensor| -> Result<Tensor> {
        ref_linear(&ref_linear(x, &l.linear_in)?.relu()?, &l.linear_out)
    };
    let a = ref_attention_layer(&l.attn, x, x, causal)?;
    match &l.norm2 {
        None => {
            let x = x.add(&a)?;
            x.add(&mlp(&ref_ln(&x, &l.norm1)?)?)
        }
        Some(n2) => {
            let x = ref_ln(&x.add(&a)?, &l.norm1)?;
            ref_ln(&x.add(&mlp(&x)?)?, n2)
        }
    }
}

/// Moves the LayerNorm parameters off their init (ones / zeros) so that the test sees them.
fn perturb(m: &dyn Module, rng: &mut Prng) {
    for (_, p) in m.named_parameters() {
        let n = p.numel();
        let noise: Vec<f64> = (0..n).map(|_| 0.2 * (rng.unit() - 0.5)).collect();
        let noise = NDArray::from_vec(noise, p.shape())
            .unwrap()
            .astype(p.dtype())
            .unwrap();
        p.array().assign(&p.array().add(&noise).unwrap()).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------

#[test]
fn multi_head_attention_paths() {
    let mut rng = Prng::new(3);
    let q = randt(&mut rng, &[2, 3, 5, 4], false);
    let k = randt(&mut rng, &[2, 3, 6, 4], false);
    let v = randt(&mut rng, &[2, 3, 6, 2], false);
    // Dropout off in eval: the fused kernel, no probabilities, the composite's values.
    let mha = MultiHeadAttention::new(0.5, true, 1).unwrap();
    mha.eval();
    let (out, probs) = mha.attend(&q, &k, &v).unwrap();
    assert!(probs.is_none());
    assert_close(
        &out,
        &q.attention_composite(&k, &v, true, None).unwrap(),
        1e-12,
        "eval",
    );
    // Dropout on in training: the probabilities come back, rows summing to 1, and every
    // output is a dropped-out (0 or 2x) mixture of them.
    mha.train();
    let (out, probs) = mha.attend(&q, &k, &v).unwrap();
    let p = probs.unwrap();
    assert_close(
        &p,
        &q.attention_probs(&k, true, None).unwrap(),
        1e-12,
        "probs",
    );
    for s in vals(&p.sum(Some(&[-1]), false).unwrap()) {
        assert!((s - 1.0).abs() < 1e-12);
    }
    assert_eq!(out.shape(), &[2, 3, 5, 2]);
    // p = 0 in training: fused again.
    let (_, probs) = MultiHeadAttention::new(0.0, false, 1)
        .unwrap()
        .attend(&q, &k, &v)
        .unwrap();
    assert!(probs.is_none());
    assert!(mha.attend(&q.reshape(&[6, 5, 4]).unwrap(), &k, &v).is_err());
}

#[test]
fn attention_layer_matches_reference_and_gradchecks() {
    let mut rng = Prng::new(4);
    for causal in [false, true] {
        let l = AttentionLayer::with_dtype([6, 5, 5, 7], 2, 3, 0.0, causal, true, 9, DType::F64)
            .unwrap();
        perturb(&l, &mut rng);
        let q = randt(&mut rng, &[2, 4, 6], true);
        let kv = randt(&mut rng, &[2, 5, 5], true);
        let got = l.attend(&q, &kv, &kv).unwrap();
        assert_eq!(got.shape(), &[2, 4, 7]);
        let want = ref_attention_layer(&l, &q, &kv, causal).unwrap();
        assert_close(&got, &want, 1e-12, "attention layer");
        let r = gradcheck(
            |t| l.attend(&t[0], &t[1], &t[1]),
            &[q, kv],
            GradcheckOptions::default(),
        )
        .unwrap();
        assert!(r.passed, "{r}");
    }
    // The f32 constructor with needle's argument order.
    let l = AttentionLayer::new(8, 2, 4, 8, 8, 8, 0.0, true, 1).unwrap();
    let x = Tensor::new(NDArray::randn(&[3, 5, 8], 2, DType::F32).unwrap());
    assert_eq!(l.forward(&x).unwrap().shape(), &[3, 5, 8]);
    assert_eq!(l.parameters().len(), 6 + 4);
}

#[test]
fn transformer_layer_pre_and_post_norm() {
    let mut rng = Prng::new(5);
    for pre_norm in [true, false] {
        let l =
            TransformerLayer::with_dtype(6, 2, 3, 10, 0.0, true, pre_norm, 3, DType::F64).unwrap();
        perturb(&l, &mut rng);
        let x = randt(&mut rng, &[2, 5, 6], true);
        let want = ref_transformer_layer(&l, &x, true).unwrap();
        assert_close(&l.forward(&x).unwrap(), &want, 1e-12, "transformer layer");
        let r = gradcheck(|t| l.forward(&t[0]), &[x], GradcheckOptions::default()).unwrap();
        assert!(r.passed, "pre_norm {pre_norm}: {r}");
    }
}

#[test]
fn transformer_adds_positions_and_transposes() {
    let mut rng = Prng::new(6);
    for batch_first in [false, true] {
        let t = Transformer::with_dtype(
            6,
            8,
            2,
            2,
            3,
            0.0,
            true,
            batch_first,
            10,
            true,
            7,
            DType::F64,
        )
        .unwrap();
        // (seq 4, batch 3) unless batch_first.
        let shape = if batch_first { [3, 4, 6] } else { [4, 3, 6] };
        let x = randt(&mut rng, &shape, true);
        let out = t.forward(&x).unwrap();
        assert_eq!(out.shape(), &shape);
        let mut h = if batch_first {
            x.clone()
        } else {
            x.transpose(0, 1).unwrap()
        };
        let pos = t.pos_embedding.weight.slice(&quill::s![0..4]).unwrap();
        h = h.add(&pos).unwrap();
        for l in &t.layers {
            h = ref_transformer_layer(l, &h, true).unwrap();
        }
        if !batch_first {
            h = h.transpose(0, 1).unwrap();
        }
        assert_close(&out, &h, 1e-12, "transformer");
        if batch_first {
            let r = gradcheck(|v| t.forward(&v[0]), &[x], GradcheckOptions::default()).unwrap();
            assert!(r.passed, "{r}");
        }
    }
    let t = Transformer::new(8, 16, 1, 2, 4, 0.1, false, true, 3, false, 1).unwrap();
    assert!(t
        .forward(&Tensor::new(
            NDArray::zeros(&[2, 4, 8], DType::F32).unwrap()
        ))
        .is_err());
    assert!(t
        .forward(&Tensor::new(
            NDArray::zeros(&[2, 3, 7], DType::F32).unwrap()
        ))
        .is_err());
    assert_eq!(t.named_buffers().len(), 2);
}

#[test]
fn two_layer_transformer_learns_to_reverse() {
    // Reversing a sequence needs attention (each output reads another position).
    let (vocab, len, batch, emb) = (6usize, 5usize, 32usize, 32usize);
    let tok = Embedding::new(vocab, emb, 1).unwrap();
    let model = Transformer::new(emb, 64, 2, 4, 8, 0.0, false, true, len, true, 2).unwrap();
    let head = Linear::new(emb, vocab, true, 3).unwrap();
    let mut params = tok.parameters();
    params.extend(model.parameters());
    params.extend(head.parameters());
    let mut opt = Adam::new(params, 3e-3).unwrap();
    let mut rng = Prng::new(8);
    let mut losses = Vec::new();
    for _ in 0..150 {
        let seqs: Vec<i64> = (0..batch * len).map(|_| rng.below(vocab) as i64).collect();
        let target: Vec<i64> = (0..batch * len)
            .map(|n| seqs[(n / len) * len + (len - 1 - n % len)])
            .collect();
        let x = tok
            .lookup(&NDArray::from_vec(seqs, &[batch, len]).unwrap())
            .unwrap();
        let logits = head.forward(&model.forward(&x).unwrap()).unwrap();
        let logits = logits.reshape(&[-1, vocab as isize]).unwrap();
        let y = NDArray::from_vec(target, &[batch * len]).unwrap();
        let loss = cross_entropy(&logits, &y, 0.0, Reduction::Mean).unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
        losses.push(loss.item().unwrap());
    }
    let first: f64 = losses[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = losses[losses.len() - 10..].iter().sum::<f64>() / 10.0;
    // Chance is ln 6 = 1.79.
    assert!(first > 1.5, "first {first}");
    assert!(last < 0.5 * first, "loss {first} -> {last}");
}
