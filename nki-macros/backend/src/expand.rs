//! Code generation: the function itself, the `static <NAME>_KERNEL: KernelDef` describing it,
//! and its `inventory` registration. Every path is absolute (`::nki_core::...`), and every
//! value is constant data so the definition lives in a `static`.

use crate::attr::{DimPat, KernelAttr, OutDim};
use crate::check::{Checked, OutDtype};
use crate::dims::DimExpr;
use crate::dtype::{DTypeName, DtypeRule};
use crate::op_info::{SampleValue, ToleranceClause};
use crate::scalar::{ScalarClass, ScalarValue};
use crate::schema::schema_as;
use crate::signature::{KernelFn, ParamKind, unraw};
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

/// The name of the generated static: `rmsnorm` → `RMSNORM_KERNEL`.
pub fn static_name(f: &KernelFn) -> Ident {
    format_ident!(
        "{}_KERNEL",
        f.name().to_uppercase(),
        span = f.item.sig.ident.span()
    )
}

/// Emits the function, its `KernelDef` static and its registration.
pub fn expand(f: &KernelFn, attr: &KernelAttr, c: &Checked<'_>) -> TokenStream {
    let item = &f.item;
    let vis = &item.vis;
    let fn_ident = &item.sig.ident;
    let name = f.name();
    let static_ident = static_name(f);
    let cfgs: Vec<_> = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .collect();
    let static_doc = format!(
        "The `#[kernel]` definition of `{name}` (`torch.ops.neuron.{name}`): its schema, shape and dtype \
         contract, and trace function."
    );
    let doc = &f.doc;
    let public = attr
        .shape
        .outputs
        .iter()
        .filter(|o| o.saved.is_none())
        .count();
    let schema = schema_as(f, &name, public);
    let forward_schema = if public == attr.shape.outputs.len() {
        quote!(::core::option::Option::None)
    } else {
        let s = schema_as(f, &format!("{name}_fwd"), attr.shape.outputs.len());
        quote!(::core::option::Option::Some(#s))
    };
    let op_info = op_info(attr);
    let (backward, backward_check) = backward(attr, &static_ident);
    let backward_check = if backward_check.is_empty() {
        backward_check
    } else {
        quote!(#(#cfgs)* #backward_check)
    };
    let params = f.params.iter().map(param_def);
    let contract = contract(attr, c);
    let replaces = attr.replaces.iter().map(|s| s.value());
    let location = quote_spanned! {fn_ident.span()=>
        ::nki_core::loc::SourceLoc { file: ::core::file!(), line: ::core::line!(), column: ::core::column!() }
    };
    let trace = trace_fn(f);
    let shard = crate::shard::expand(&attr.shard);
    quote! {
        #item

        #(#cfgs)*
        #[doc = #static_doc]
        #vis static #static_ident: ::nki_core::kernel_def::KernelDef = ::nki_core::kernel_def::KernelDef {
            name: #name,
            doc: #doc,
            schema: #schema,
            forward_schema: #forward_schema,
            params: &[#(#params),*],
            contract: #contract,
            replaces: &[#(#replaces),*],
            location: #location,
            backward: #backward,
            shard: #shard,
            #op_info
            trace: #trace,
        };

        #backward_check

        #(#cfgs)*
        ::nki_core::__private::inventory::submit! {
            ::nki_core::__private::KernelRegistration(&#static_ident)
        }
    }
}

fn param_def(p: &crate::signature::Param) -> TokenStream {
    let name = unraw(&p.name);
    let kind = match p.kind {
        ParamKind::Tensor => quote!(::nki_core::kernel_def::ParamKind::Tensor),
        ParamKind::OptionalTensor => quote!(::nki_core::kernel_def::ParamKind::OptionalTensor),
        ParamKind::Scalar {
            ty,
            default,
            optional,
        } => {
            let variant = match ty.class() {
                ScalarClass::Float => quote!(Float),
                ScalarClass::Int => quote!(Int),
                ScalarClass::Bool => quote!(Bool),
                ScalarClass::Str => {
                    let choices = &p.choices;
                    let default = match default {
                        Some(ScalarValue::Choice(i)) => {
                            let d = &p.choices[i];
                            quote!(::core::option::Option::Some(#d))
                        }
                        _ => quote!(::core::option::Option::None),
                    };
                    return quote!(::nki_core::kernel_def::ParamDef {
                        name: #name,
                        kind: ::nki_core::kernel_def::ParamKind::Str {
                            choices: &[#(#choices),*],
                            default: #default,
                        },
                    });
                }
            };
            let default = match default {
                None => quote!(::core::option::Option::None),
                Some(v) => {
                    let v = scalar_literal(v);
                    quote!(::core::option::Option::Some(#v))
                }
            };
            quote!(::nki_core::kernel_def::ParamKind::#variant { default: #default, optional: #optional })
        }
    };
    quote!(::nki_core::kernel_def::ParamDef { name: #name, kind: #kind })
}

/// A default value literal (its type, `f64`, `i64` or `bool`, comes from the field). Negative
/// numbers are emitted as `-` followed by a literal.
fn scalar_literal(v: ScalarValue) -> TokenStream {
    match v {
        ScalarValue::Float(x) => {
            let lit = Literal::f64_unsuffixed(x.abs());
            if x.is_sign_negative() {
                quote!(-#lit)
            } else {
                quote!(#lit)
            }
        }
        ScalarValue::Int(i) => int_literal(i),
        ScalarValue::Bool(b) => quote!(#b),
        ScalarValue::Choice(i) => int_literal(i as i64),
    }
}

fn int_literal(i: i64) -> TokenStream {
    let lit = Literal::u64_unsuffixed(i.unsigned_abs());
    if i < 0 { quote!(-#lit) } else { quote!(#lit) }
}

fn contract(attr: &KernelAttr, c: &Checked<'_>) -> TokenStream {
    let p = quote!(::nki_core::contract);
    let inputs = c.inputs.iter().map(|i| {
        let param = unraw(&i.param);
        let dims = i.dims.iter().map(|d| match d {
            DimPat::Sym(s) => {
                let s = s.to_string();
                quote!(#p::DimPattern::Sym { name: #s })
            }
            DimPat::Const { value, .. } => {
                let v = Literal::u64_unsuffixed(*value);
                quote!(#p::DimPattern::Const { value: #v })
            }
            DimPat::Rest(s) => {
                let s = s.to_string();
                quote!(#p::DimPattern::Rest { name: #s })
            }
        });
        quote!(#p::InputShape { param: #param, dims: &[#(#dims),*] })
    });
    let dtypes = c.dtypes.iter().map(|d| {
        let param = unraw(&d.param);
        let rule = match &d.rule {
            DtypeRule::OneOf(names) => {
                let names = names.iter().map(|n| dtype(*n));
                quote!(#p::DtypeRule::OneOf { allowed: &[#(#names),*] })
            }
            DtypeRule::SameAs(other) => {
                let other = unraw(other);
                quote!(#p::DtypeRule::SameAs { param: #other })
            }
        };
        quote!(#p::InputDtype { param: #param, rule: #rule })
    });
    let outputs = attr
        .shape
        .outputs
        .iter()
        .zip(&c.output_dtypes)
        .zip(&c.output_names)
        .map(|((shape, dt), out_name)| {
            let saved = shape.saved.is_some();
            let out_dims = |dims: &[OutDim]| {
                let dims = dims.iter().map(|d| match d {
                    OutDim::Expr(e) => {
                        let e = dim_expr(e);
                        quote!(#p::OutDim::Expr { expr: #e })
                    }
                    OutDim::Rest(s) => {
                        let s = s.to_string();
                        quote!(#p::OutDim::Rest { name: #s })
                    }
                });
                quote!(&[#(#dims),*])
            };
            let dims = out_dims(&shape.dims);
            let by_choice = match &shape.by_choice {
                None => quote!(::core::option::Option::None),
                Some(m) => {
                    let param = unraw(&m.param);
                    // The last arm is the default (`shape`); the others are the cases.
                    let cases = m.arms[..m.arms.len() - 1].iter().map(|a| {
                        let values = a.values.iter().map(|v| v.value());
                        let shape = out_dims(&a.dims);
                        quote!(#p::ShapeCase { values: &[#(#values),*], shape: #shape })
                    });
                    quote!(::core::option::Option::Some(#p::ShapeMatch {
                        param: #param,
                        cases: &[#(#cases),*],
                    }))
                }
            };
            let dtype = match dt {
                OutDtype::SameAs(param) => {
                    let param = unraw(param);
                    quote!(#p::OutputDtype::SameAs { param: #param })
                }
                OutDtype::Fixed(d) => {
                    let d = dtype(*d);
                    quote!(#p::OutputDtype::Fixed { dtype: #d })
                }
            };
            quote!(#p::OutputSpec { name: #out_name, saved: #saved, shape: #dims, by_choice: #by_choice, dtype: #dtype })
        });
    let requires = attr.requires.iter().map(|r| {
        let (lhs, rhs) = (dim_expr(&r.lhs), dim_expr(&r.rhs));
        let op = variant(r.op);
        quote!(#p::Requirement { lhs: #lhs, op: #p::CmpOp::#op, rhs: #rhs })
    });
    quote! {
        #p::Contract {
            inputs: &[#(#inputs),*],
            dtypes: &[#(#dtypes),*],
            outputs: &[#(#outputs),*],
            requires: &[#(#requires),*],
        }
    }
}

/// The `reference`, `samples` and `tolerance` fields.
fn op_info(attr: &KernelAttr) -> TokenStream {
    let o = quote!(::nki_core::op_info);
    let reference = match &attr.reference {
        Some(r) => quote!(::core::option::Option::Some(#r)),
        None => quote!(::core::option::Option::None),
    };
    let sample = |s: &crate::op_info::SampleClause| {
        let args = s.args.iter().map(|(name, v)| {
            let name = unraw(name);
            let v = match v {
                SampleValue::Shape(dims) => {
                    let dims = dims.iter().map(|d| Literal::u64_unsuffixed(*d));
                    quote!(#o::SampleArg::Tensor(&[#(#dims),*]))
                }
                SampleValue::Absent(_) => quote!(#o::SampleArg::Absent),
                SampleValue::Scalar(ScalarValue::Float(x), _) => {
                    let x = scalar_literal(ScalarValue::Float(*x));
                    quote!(#o::SampleArg::Float(#x))
                }
                SampleValue::Scalar(ScalarValue::Int(i), _) => {
                    let i = int_literal(*i);
                    quote!(#o::SampleArg::Int(#i))
                }
                SampleValue::Scalar(ScalarValue::Bool(b), _) => quote!(#o::SampleArg::Bool(#b)),
                SampleValue::Scalar(ScalarValue::Choice(_), _) => {
                    unreachable!("sample literals are never choices")
                }
                SampleValue::Str(v, _) => quote!(#o::SampleArg::Str(#v)),
            };
            quote!((#name, #v))
        });
        let dtypes = s.dtypes.iter().flatten().map(|d| dtype(*d));
        quote!(#o::Sample { args: &[#(#args),*], dtypes: &[#(#dtypes),*] })
    };
    let samples = attr.samples.iter().map(sample);
    let bench = match &attr.bench {
        Some(b) => {
            let b = sample(b);
            quote!(::core::option::Option::Some(#b))
        }
        None => quote!(::core::option::Option::None),
    };
    let tolerance = match &attr.tolerance {
        None | Some(ToleranceClause::Elementwise) => quote!(#o::ToleranceClass::Elementwise),
        Some(ToleranceClause::Matmul) => quote!(#o::ToleranceClass::Matmul),
        Some(ToleranceClause::Reduction(e)) => {
            let e = dim_expr(e);
            quote!(#o::ToleranceClass::Reduction { dim: #e })
        }
    };
    let autocast = variant(attr.autocast.map_or("Keep", |a| a.variant()));
    quote! {
        reference: #reference,
        samples: &[#(#samples),*],
        tolerance: #tolerance,
        autocast: #o::AutocastPolicy::#autocast,
        bench: #bench,
    }
}

/// The `backward` field and the `const` that checks the backward kernel's contract against
/// this kernel's at compile time (the error points at the `backward(...)` kernel path).
fn backward(attr: &KernelAttr, static_ident: &Ident) -> (TokenStream, TokenStream) {
    let Some(b) = &attr.backward else {
        return (quote!(::core::option::Option::None), TokenStream::new());
    };
    let mut path = b.kernel.clone();
    let span = match path.segments.last_mut() {
        Some(last) => {
            let span = last.ident.span();
            last.ident = format_ident!("{}_KERNEL", unraw(&last.ident).to_uppercase(), span = span);
            span
        }
        None => Span::call_site(),
    };
    let saves = b.saves.iter().map(unraw);
    let def = quote_spanned! {span=>
        ::core::option::Option::Some(::nki_core::autodiff::BackwardDef {
            kernel: &#path,
            saves: &[#(#saves),*],
        })
    };
    let check = quote_spanned! {span=>
        const _: () = {
            if let ::core::result::Result::Err(msg) = ::nki_core::autodiff::check_backward(
                &#static_ident,
                &#path,
                match &#static_ident.backward {
                    ::core::option::Option::Some(b) => b.saves,
                    ::core::option::Option::None => &[],
                },
            ) {
                ::core::panic!("{}", msg.as_str());
            }
        };
    };
    (def, check)
}

/// The variant identifier of a shared-vocabulary enum value (its `Debug` name: `Le`, `BF16`).
fn variant(v: impl std::fmt::Debug) -> Ident {
    let name = format!("{v:?}");
    Ident::new(name.trim_matches('"'), Span::call_site())
}

fn dtype(d: DTypeName) -> TokenStream {
    let v = variant(d);
    quote!(::nki_core::dtype::DType::#v)
}

/// A `DimExpr` constant; operands of `Binary` are `&` references promoted to `'static`.
fn dim_expr(e: &DimExpr) -> TokenStream {
    let p = quote!(::nki_core::contract);
    match e {
        DimExpr::Sym(s) => {
            let s = s.to_string();
            quote!(#p::DimExpr::Sym { name: #s })
        }
        DimExpr::Const { value, .. } => {
            let v = int_literal(*value);
            quote!(#p::DimExpr::Const { value: #v })
        }
        DimExpr::Binary { op, lhs, rhs } => {
            let op = variant(op);
            let (l, r) = (dim_expr(lhs), dim_expr(rhs));
            quote!(#p::DimExpr::Binary { op: #p::DimOp::#op, lhs: &#l, rhs: &#r })
        }
    }
}

/// The block `{ fn __nki_trace(args) -> Vec<Hbm> { ... } __nki_trace }` that calls the kernel
/// with arguments unpacked by position.
fn trace_fn(f: &KernelFn) -> TokenStream {
    let fn_ident = &f.item.sig.ident;
    let args = f.params.iter().enumerate().map(|(i, p)| {
        let i = Literal::usize_unsuffixed(i);
        match p.kind {
            ParamKind::Tensor => quote!(args.tensor(#i)),
            ParamKind::OptionalTensor => quote!(args.opt_tensor(#i)),
            ParamKind::Scalar { ty, optional, .. } => {
                let get = match (ty.class(), optional) {
                    (ScalarClass::Float, false) => quote!(args.float(#i)),
                    (ScalarClass::Int, false) => quote!(args.int(#i)),
                    (ScalarClass::Bool, false) => quote!(args.bool(#i)),
                    (ScalarClass::Float, true) => quote!(args.opt_float(#i)),
                    (ScalarClass::Int, true) => quote!(args.opt_int(#i)),
                    (ScalarClass::Bool, true) => quote!(args.opt_bool(#i)),
                    (ScalarClass::Str, _) => quote!(args.str(#i)),
                };
                if ty.is_accessor_type() {
                    return get;
                }
                let rust_ty = Ident::new(ty.rust_name(), Span::call_site());
                if optional {
                    quote!(#get.map(|v| v as #rust_ty))
                } else {
                    quote!(#get as #rust_ty)
                }
            }
        }
    });
    quote! {
        {
            fn __nki_trace(
                args: &::nki_core::__private::KernelArgs,
            ) -> ::std::vec::Vec<::nki_core::language::Hbm> {
                ::nki_core::__private::IntoOutputs::into_outputs(#fn_ident(#(#args),*))
            }
            __nki_trace
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::expand_kernel;
    use proc_macro2::TokenStream;

    /// Expands and checks that the result is a valid Rust file: fn, static, submission.
    fn expand(attr: &str, item: &str) -> String {
        let attr: TokenStream = attr.parse().unwrap();
        let item: TokenStream = item.parse().unwrap();
        let out = expand_kernel(attr, item).unwrap();
        let file: syn::File = syn::parse2(out.clone()).expect("the expansion parses as items");
        assert!(matches!(
            &file.items[..],
            [syn::Item::Fn(_), syn::Item::Static(_), syn::Item::Macro(_)]
        ));
        out.to_string()
    }

    /// Token text with the spaces `TokenStream`'s `Display` inserts removed, for substring checks.
    fn squash(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }

    #[test]
    fn expands_rmsnorm() {
        let out = expand(
            r#"shape(x = [N, D], weight = [D]) -> [N, D], dtype(x in {f32, bf16, f16}, weight = x) -> x,
               require(D <= 16384), replaces("torch.nn.RMSNorm", "*.LlamaRMSNorm")"#,
            "/// RMSNorm over the last dim.\n/// Second line.\npub fn rmsnorm(x: &Hbm, weight: &Hbm, #[default(1e-6)] eps: f32) -> Hbm { todo!() }",
        );
        let s = squash(&out);
        for want in [
            "pubfnrmsnorm(x:&Hbm,weight:&Hbm,eps:f32)->Hbm",
            "pubstaticRMSNORM_KERNEL:::nki_core::kernel_def::KernelDef",
            "name:\"rmsnorm\"",
            "doc:\"RMSNormoverthelastdim.\\nSecondline.\"",
            "schema:\"rmsnorm(Tensorx,Tensorweight,floateps=1e-06)->Tensor\"",
            "ParamDef{name:\"eps\",kind:::nki_core::kernel_def::ParamKind::Float{default:::core::option::Option::Some(0.000001),optional:false}}",
            "InputShape{param:\"x\",dims:&[::nki_core::contract::DimPattern::Sym{name:\"N\"},::nki_core::contract::DimPattern::Sym{name:\"D\"}]}",
            "DtypeRule::OneOf{allowed:&[::nki_core::dtype::DType::F32,::nki_core::dtype::DType::BF16,::nki_core::dtype::DType::F16]}",
            "InputDtype{param:\"weight\",rule:::nki_core::contract::DtypeRule::SameAs{param:\"x\"}}",
            "OutputDtype::SameAs{param:\"x\"}",
            "Requirement{lhs:::nki_core::contract::DimExpr::Sym{name:\"D\"},op:::nki_core::contract::CmpOp::Le,rhs:::nki_core::contract::DimExpr::Const{value:16384}}",
            "replaces:&[\"torch.nn.RMSNorm\",\"*.LlamaRMSNorm\"]",
            "line:::core::line!()",
            "into_outputs(rmsnorm(args.tensor(0),args.tensor(1),args.float(2)asf32))",
            "::nki_core::__private::inventory::submit!{::nki_core::__private::KernelRegistration(&RMSNORM_KERNEL)}",
        ] {
            assert!(s.contains(&squash(want)), "missing {want}\nin {out}");
        }
        assert!(!s.contains("#[default"), "{out}");
    }

    #[test]
    fn expands_rest_expressions_tuples_and_casts() {
        let out = expand(
            "shape(x = [..S, K], y = [128]) -> ([..S, (K + 127) / 128], [..S]), dtype(x in {f8e4m3}, y in {f32}) -> (y, bf16), require(K % 2 == 0)",
            "/// Two outputs.\nfn two(x: &Hbm, y: &Hbm, n: usize, m: i64, #[default(-0.5)] s: f64, #[default(-7)] k: i32, #[default(true)] b: bool) -> (Hbm, Hbm) { todo!() }",
        );
        let s = squash(&out);
        for want in [
            "staticTWO_KERNEL",
            "schema:\"two(Tensorx,Tensory,intn,intm,floats=-0.5,intk=-7,boolb=True)->(Tensor,Tensor)\"",
            "DimPattern::Rest{name:\"S\"}",
            "DimPattern::Const{value:128}",
            "OutDim::Rest{name:\"S\"}",
            "DimExpr::Binary{op:::nki_core::contract::DimOp::Div,lhs:&::nki_core::contract::DimExpr::Binary{op:::nki_core::contract::DimOp::Add",
            "OutputDtype::Fixed{dtype:::nki_core::dtype::DType::BF16}",
            "Float{default:::core::option::Option::Some(-0.5),optional:false}",
            "Int{default:::core::option::Option::Some(-7),optional:false}",
            "Bool{default:::core::option::Option::Some(true),optional:false}",
            "Int{default:::core::option::Option::None,optional:false}",
            "two(args.tensor(0),args.tensor(1),args.int(2)asusize,args.int(3),args.float(4),args.int(5)asi32,args.bool(6))",
        ] {
            assert!(s.contains(&squash(want)), "missing {want}\nin {out}");
        }
    }

    #[test]
    fn private_functions_get_private_statics_and_cfgs_carry_over() {
        let out = expand(
            "shape(x = [N]) -> [N], dtype(x in {f32}) -> f32",
            "/// Doc.\n#[cfg(feature = \"x\")]\nfn r#add(x: &Hbm) -> Hbm { todo!() }",
        );
        let s = squash(&out);
        assert!(s.contains("#[cfg(feature=\"x\")]#[doc="), "{out}");
        assert!(s.contains("]staticADD_KERNEL"), "{out}");
        assert!(s.contains("name:\"add\""), "{out}");
        assert_eq!(s.matches("#[cfg(feature=\"x\")]").count(), 3, "{out}");
    }
}
