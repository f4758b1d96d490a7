//! `#[guard]` / `#[guard("Class")]`: put above a `#[pyfunction]` or a `#[pymethods]` impl, it
//! rewrites each function body to run inside `crate::guard::call(NAME, ...)`, which catches a
//! Rust panic and raises `quill.InternalError` (a `RuntimeError`) naming the call
//! (`"NDArray.__getitem__"`), instead of PyO3's `PanicException`, which derives from
//! `BaseException` and escapes `except Exception`. A function returning `T` comes to return
//! `PyResult<T>`, which PyO3 accepts wherever it accepts `T`. The buffer-protocol and GC slots,
//! whose signatures PyO3 fixes, are left as they are.

#![warn(missing_docs)]

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Block, Item, LitStr, ReturnType, Signature, Type};

/// Runs the body of the annotated `#[pyfunction]`, or of every method of the annotated
/// `#[pymethods]` impl, under `crate::guard::call`, so a panic surfaces in Python as
/// `quill.InternalError` naming the call. The optional string argument is the Python class
/// name, used only to prefix method names in that message (`#[guard("NDArray")]` on the impl
/// gives `"NDArray.reshape"`).
///
/// The expansion names `crate::guard::call` and `::pyo3`, so it works only inside a crate that
/// defines that function (quill-py's `guard.rs`) and depends on pyo3. Anything other than a
/// `fn` or an `impl` block, or an argument that is not a string literal, is a compile error.
#[proc_macro_attribute]
pub fn guard(attr: TokenStream, item: TokenStream) -> TokenStream {
    let class = if attr.is_empty() {
        None
    } else {
        Some(parse_macro_input!(attr as LitStr).value())
    };
    let mut item = parse_macro_input!(item as Item);
    match &mut item {
        Item::Fn(f) => wrap(&mut f.sig, &mut f.block, class.as_deref()),
        Item::Impl(imp) => {
            for it in &mut imp.items {
                if let syn::ImplItem::Fn(f) = it {
                    wrap(&mut f.sig, &mut f.block, class.as_deref());
                }
            }
        }
        _ => {
            return syn::Error::new_spanned(&item, "#[guard] goes on a fn or an impl block")
                .to_compile_error()
                .into()
        }
    }
    quote!(#item).into()
}

/// Whether `ty` is `PyResult<..>` (by its last path segment).
fn is_py_result(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "PyResult"))
}

fn wrap(sig: &mut Signature, block: &mut Block, class: Option<&str>) {
    let fname = sig.ident.to_string();
    if matches!(
        fname.as_str(),
        "__getbuffer__" | "__releasebuffer__" | "__traverse__" | "__clear__"
    ) {
        return;
    }
    let name = match class {
        Some(c) => format!("{c}.{fname}"),
        None => fname,
    };
    let body = &block;
    let new_body: Block = match &sig.output {
        ReturnType::Type(_, ty) if is_py_result(ty) => syn::parse_quote!({
            crate::guard::call(#name, move || -> #ty #body)
        }),
        ReturnType::Type(_, ty) => {
            let ty = ty.clone();
            sig.output = syn::parse_quote!(-> ::pyo3::PyResult<#ty>);
            syn::parse_quote!({
                crate::guard::call(#name, move || -> ::pyo3::PyResult<#ty> {
                    ::std::result::Result::Ok((move || -> #ty #body)())
                })
            })
        }
        ReturnType::Default => {
            sig.output = syn::parse_quote!(-> ::pyo3::PyResult<()>);
            syn::parse_quote!({
                crate::guard::call(#name, move || -> ::pyo3::PyResult<()> {
                    (move || #body)();
                    ::std::result::Result::Ok(())
                })
            })
        }
    };
    *block = new_body;
}
