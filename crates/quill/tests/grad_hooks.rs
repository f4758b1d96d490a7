//! Post-accumulate gradient hooks: a hook sees the leaf's final gradient for the pass (also
//! when the leaf is used several times), runs once per backward, runs in reverse order of use
//! (output side first), can be removed, and its error ends backward.

use quill::tensor::Tensor;
use quill::DType;
use std::cell::RefCell;
use std::rc::Rc;

/// (which leaf, its gradient when the hook ran), in hook order.
type Log = Rc<RefCell<Vec<(char, Vec<f64>)>>>;

fn leaf(v: Vec<f64>) -> Tensor {
    let n = v.len();
    Tensor::from_vec(v, &[n])
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

#[test]
fn hooks_see_final_gradients_in_reverse_order_and_can_be_removed() {
    let (a, b) = (leaf(vec![1.0, 2.0]), leaf(vec![3.0, -1.0]));
    let log: Log = Rc::default();
    let (l1, l2) = (log.clone(), log.clone());
    let ha = a.register_post_accumulate_grad_hook(Rc::new(move |t: &Tensor| {
        l1.borrow_mut()
            .push(('a', t.grad().unwrap().to_vec::<f64>()?));
        Ok(())
    }));
    b.register_post_accumulate_grad_hook(Rc::new(move |t: &Tensor| {
        l2.borrow_mut()
            .push(('b', t.grad().unwrap().to_vec::<f64>()?));
        Ok(())
    }));
    // loss = sum(b * (a * a) + a): a is used twice, b only near the output.
    let loss = b
        .mul(&a.mul(&a).unwrap())
        .unwrap()
        .add(&a)
        .unwrap()
        .sum(None, false)
        .unwrap();
    loss.backward().unwrap();
    // d/da = 2 a b + 1, d/db = a^2, each hook once, b's (nearer the output) first.
    assert_eq!(
        log.borrow().as_slice(),
        &[('b', vec![1.0, 4.0]), ('a', vec![7.0, -3.0])]
    );
    assert!(a.remove_grad_hook(ha));
    assert!(!a.remove_grad_hook(ha));
    log.borrow_mut().clear();
    let loss = a.sum(None, false).unwrap();
    loss.backward().unwrap();
    // a's hook is gone; its gradient accumulated (7 + 1, -3 + 1).
    assert!(log.borrow().is_empty());
    assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), vec![8.0, -2.0]);
}

#[test]
fn a_hook_error_ends_backward_with_that_error() {
    let a = Tensor::ones(&[3], DType::F32)
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    a.register_post_accumulate_grad_hook(Rc::new(|_t: &Tensor| {
        Err(quill::Error::invalid("my_hook", "refused"))
    }));
    let err = a.sum(None, false).unwrap().backward().unwrap_err();
    assert!(err.to_string().contains("my_hook"), "{err}");
}
